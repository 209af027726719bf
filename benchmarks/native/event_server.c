/*
 * dsv4h native event server: a load source for the client benchmark (benchmarks/bench_scale.py).
 *
 * Speaks just enough HTTP/1.1 for the harness client's SGLang-native stream path:
 *   POST /generate  {"input_ids":[...],"sampling_params":{"max_new_tokens":N,...},"stream":true,"rid":"..."}
 *     -> 200 text/event-stream, chunked: one `data: {...}` event per decode step, byte-compatible with the
 *        Python simulator's delta mode (harness/sim/protocol.py EventEncoder, stream_mode delta), each
 *        with meta_info.sim_emit_ns = CLOCK_MONOTONIC ns taken right before the event is written (the
 *        clock of Python's time.perf_counter_ns() on Linux); then `data: [DONE]`.
 *   GET /stats, /server_info, /get_server_info: the server's own counters (JSON), summed over threads.
 *   GET|POST /stats/reset: zero the counters.   GET /health, /v1/models, /get_model_info.
 *
 * Timing model: one decode step every --step-ms on ONE grid t0 + k*step (t0 = CLOCK_MONOTONIC at start,
 * shared by all threads). A stream admitted (request parsed) between two grid instants gets its first
 * token at the next one and one token at each later one, max_new_tokens in all (no EOS). Each thread owns
 * the connections the kernel gave its SO_REUSEPORT listener and writes its streams' events at each grid
 * instant (a timerfd armed on the absolute instant), final events after all others of the step.
 * Lateness per step = the instant its burst finished minus its grid instant (histogram, 5 us bins):
 * that is the proof the server kept up. A burst that finishes after the next grid instant counts as
 * a missed step; the grid is never shifted, so every stream still gets exactly one event per step.
 *
 * Usage: event_server [--port P] [--host 127.0.0.1] [--step-ms 20] [--threads 4] [--ready-file F]
 *                     [--late-frac 0.1]
 * Linux only (epoll, timerfd, SO_REUSEPORT). Build: benchmarks/native/build.sh.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define HBIN_NS 5000LL
#define HBINS 40000 /* 5 us bins up to 200 ms; the last bin holds everything above */
#define RID_MAX 160
#define MAX_REQ (64 << 20)

typedef struct {
  char *p;
  size_t len, cap, off; /* valid bytes are p[off..len) */
} buf_t;

typedef struct conn {
  int fd;
  buf_t in, out;
  int streaming, want_out, close_after, final_now;
  char rid[RID_MAX];
  long prompt_tokens, max_new, n_out;
  int64_t arrival_ns;
  long active_idx; /* index in the thread's active list, -1 when not streaming */
} conn_t;

typedef struct {
  pthread_mutex_t mu;
  uint64_t steps, events, streams_started, streams_finished, late_steps, missed_steps;
  int64_t emit_late_max, wake_late_max;
  double emit_late_sum;
  uint32_t hist[HBINS];
} stats_t;

typedef struct {
  int id, epfd, lfd, tfd;
  conn_t **active;
  long n_active, cap_active;
  int64_t armed_ns; /* grid instant the timer is armed for; 0 = not armed */
  conn_t **dead;    /* closed in this epoll batch; freed after it (later events may name them) */
  long n_dead, cap_dead;
  conn_t **fin; /* streams that ended in this step */
  long cap_fin;
  stats_t st;
} thread_t;

static int64_t g_t0, g_step;
static double g_late_frac = 0.1;
static int g_threads = 4;
static thread_t g_th[MAX_THREADS];
static uint64_t g_rid_seq;
static char g_tag_listen, g_tag_timer;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void buf_reserve(buf_t *b, size_t extra) {
  if (b->off > 0 && b->off == b->len) b->off = b->len = 0;
  if (b->len + extra <= b->cap) return;
  if (b->off > 0) { /* compact first */
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
    if (b->len + extra <= b->cap) return;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra) cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) die("realloc");
  b->cap = cap;
}

static void buf_add(buf_t *b, const char *s, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

/* ----- output ----------------------------------------------------------------------------------- */

static void conn_close(thread_t *t, conn_t *c);
static int handle_input(thread_t *t, conn_t *c);

static void set_out_interest(thread_t *t, conn_t *c, int on) {
  if (c->want_out == on) return;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = on;
}

/* Write what is buffered; returns -1 when the connection broke (closed here). */
static int conn_flush(thread_t *t, conn_t *c) {
  while (c->out.off < c->out.len) {
    ssize_t n = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out.off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      set_out_interest(t, c, 1);
      return 0;
    }
    conn_close(t, c);
    return -1;
  }
  c->out.off = c->out.len = 0;
  set_out_interest(t, c, 0);
  if (c->close_after && !c->streaming) {
    conn_close(t, c);
    return -1;
  }
  return 0;
}

static void add_chunk(buf_t *b, const char *data, size_t n) {
  char head[24];
  int h = snprintf(head, sizeof head, "%zx\r\n", n);
  buf_reserve(b, (size_t)h + n + 2);
  memcpy(b->p + b->len, head, (size_t)h);
  memcpy(b->p + b->len + h, data, n);
  memcpy(b->p + b->len + h + n, "\r\n", 2);
  b->len += (size_t)h + n + 2;
}

static void respond(conn_t *c, int status, const char *ctype, const char *body, size_t n) {
  char head[256];
  const char *reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Bad Request";
  int h = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status, reason,
                   ctype, n, c->close_after ? "Connection: close\r\n" : "");
  buf_add(&c->out, head, (size_t)h);
  buf_add(&c->out, body, n);
}

/* One event of a stream (delta mode): the next token; the final one carries the finish reason. */
static void emit_event(conn_t *c) {
  char ev[RID_MAX + 512];
  c->n_out++;
  long tok = 1000 + c->n_out % 20000;
  int last = c->n_out >= c->max_new;
  int64_t t = now_ns();
  int n;
  if (!last)
    n = snprintf(ev, sizeof ev,
                 "data: {\"text\":\" w%ld\",\"output_ids\":[%ld],\"meta_info\":{\"id\":\"%s\",\"finish_reason\":null,"
                 "\"prompt_tokens\":%ld,\"completion_tokens\":%ld,\"cached_tokens\":0,\"weight_version\":\"default\","
                 "\"total_retractions\":0,\"sim_emit_ns\":%lld}}\n\n",
                 tok, tok, c->rid, c->prompt_tokens, c->n_out, (long long)t);
  else
    n = snprintf(ev, sizeof ev,
                 "data: {\"text\":\" w%ld\",\"output_ids\":[%ld],\"meta_info\":{\"id\":\"%s\",\"finish_reason\":"
                 "{\"type\":\"length\",\"length\":%ld},\"prompt_tokens\":%ld,\"completion_tokens\":%ld,"
                 "\"cached_tokens\":0,\"weight_version\":\"default\",\"total_retractions\":0,\"e2e_latency\":%.6f,"
                 "\"sim_emit_ns\":%lld}}\n\n",
                 tok, tok, c->rid, c->max_new, c->prompt_tokens, c->n_out, (double)(t - c->arrival_ns) / 1e9,
                 (long long)t);
  add_chunk(&c->out, ev, (size_t)n);
  if (last) {
    static const char done[] = "data: [DONE]\n\n";
    add_chunk(&c->out, done, sizeof done - 1);
    buf_add(&c->out, "0\r\n\r\n", 5);
  }
}

/* ----- the step grid ---------------------------------------------------------------------------- */

static void arm(thread_t *t, int64_t at) {
  struct itimerspec its = {0};
  its.it_value.tv_sec = at / 1000000000LL;
  its.it_value.tv_nsec = at % 1000000000LL;
  if (timerfd_settime(t->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) die("timerfd_settime");
  t->armed_ns = at;
}

static void deactivate(thread_t *t, conn_t *c) {
  long i = c->active_idx;
  if (i < 0) return;
  t->active[i] = t->active[--t->n_active];
  t->active[i]->active_idx = i;
  c->active_idx = -1;
}

static void activate(thread_t *t, conn_t *c) {
  if (t->n_active == t->cap_active) {
    t->cap_active = t->cap_active ? 2 * t->cap_active : 256;
    t->active = realloc(t->active, (size_t)t->cap_active * sizeof *t->active);
    if (!t->active) die("realloc");
  }
  c->active_idx = t->n_active;
  t->active[t->n_active++] = c;
  if (!t->armed_ns) {
    int64_t now = now_ns();
    int64_t k = (now - g_t0) / g_step + 1;
    arm(t, g_t0 + k * g_step);
  }
}

static void step(thread_t *t) {
  uint64_t expirations;
  if (read(t->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("read timerfd");
  int64_t grid = t->armed_ns, wake = now_ns();
  t->armed_ns = 0;
  long n = t->n_active, events = 0, finished = 0;
  /* non-final events first, final ones after (as the simulator: a window ends on a step boundary) */
  for (long i = 0; i < t->n_active; i++) t->active[i]->final_now = t->active[i]->n_out + 1 >= t->active[i]->max_new;
  for (int pass = 0; pass < 2; pass++) {
    for (long i = 0; i < t->n_active; i++) {
      conn_t *c = t->active[i];
      int last = c->final_now;
      if (last != pass) continue;
      emit_event(c);
      events++;
      if (last) {
        c->streaming = 0;
        finished++;
      }
      if (conn_flush(t, c) < 0) i--; /* closed: swapped out of the list */
    }
  }
  long n_done = 0;
  for (long i = 0; i < t->n_active; i++) {
    conn_t *c = t->active[i];
    if (!c->streaming) {
      deactivate(t, c);
      if (n_done == t->cap_fin) {
        t->cap_fin = t->cap_fin ? 2 * t->cap_fin : 256;
        t->fin = realloc(t->fin, (size_t)t->cap_fin * sizeof *t->fin);
        if (!t->fin) die("realloc");
      }
      t->fin[n_done++] = c;
      i--;
    }
  }
  int64_t end = now_ns(), late = end - grid;
  pthread_mutex_lock(&t->st.mu);
  if (n > 0) {
    t->st.steps++;
    t->st.events += (uint64_t)events;
    t->st.streams_finished += (uint64_t)finished;
    if (late > t->st.emit_late_max) t->st.emit_late_max = late;
    if (wake - grid > t->st.wake_late_max) t->st.wake_late_max = wake - grid;
    t->st.emit_late_sum += (double)late;
    if ((double)late > g_late_frac * (double)g_step) t->st.late_steps++;
    if (late > g_step) t->st.missed_steps++;
    int64_t b = late < 0 ? 0 : late / HBIN_NS;
    t->st.hist[b >= HBINS ? HBINS - 1 : b]++;
  }
  pthread_mutex_unlock(&t->st.mu);
  if (t->n_active > 0) arm(t, grid + g_step); /* absolute grid: never shifted */
  /* a connection whose stream just ended may already hold its next request */
  for (long i = 0; i < n_done; i++) {
    conn_t *c = t->fin[i];
    if (c->fd >= 0 && c->in.len > c->in.off && handle_input(t, c) < 0) conn_close(t, c);
  }
}

/* ----- requests --------------------------------------------------------------------------------- */

static const char *find_key(const char *body, size_t n, const char *key) {
  const char *p = memmem(body, n, key, strlen(key));
  if (!p) return NULL;
  p += strlen(key);
  while (p < body + n && (*p == ' ' || *p == ':' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p < body + n ? p : NULL;
}

static pthread_mutex_t g_stats_mu = PTHREAD_MUTEX_INITIALIZER;

static void stats_json(char *out, size_t cap, int *len) {
  pthread_mutex_lock(&g_stats_mu);
  uint64_t steps = 0, events = 0, started = 0, finished = 0, late = 0, missed = 0, total = 0;
  int64_t emax = 0, wmax = 0;
  double esum = 0;
  static uint32_t hist[HBINS];
  memset(hist, 0, sizeof hist);
  for (int i = 0; i < g_threads; i++) {
    stats_t *s = &g_th[i].st;
    pthread_mutex_lock(&s->mu);
    steps += s->steps;
    events += s->events;
    started += s->streams_started;
    finished += s->streams_finished;
    late += s->late_steps;
    missed += s->missed_steps;
    esum += s->emit_late_sum;
    if (s->emit_late_max > emax) emax = s->emit_late_max;
    if (s->wake_late_max > wmax) wmax = s->wake_late_max;
    for (int b = 0; b < HBINS; b++) hist[b] += s->hist[b];
    pthread_mutex_unlock(&s->mu);
  }
  for (int b = 0; b < HBINS; b++) total += hist[b];
  double q[2] = {0.5, 0.99}, qv[2] = {0, 0};
  for (int j = 0; j < 2 && total; j++) {
    uint64_t want = (uint64_t)(q[j] * (double)total + 0.999999), acc = 0;
    for (int b = 0; b < HBINS; b++) {
      acc += hist[b];
      if (acc >= want) {
        qv[j] = (double)(b + 1) * HBIN_NS / 1e9; /* upper edge of the bin */
        break;
      }
    }
  }
  *len = snprintf(out, cap,
                  "{\"server\":\"dsv4h-native-event-server\",\"label\":\"simulated\",\"step_s\":%.9f,\"threads\":%d,"
                  "\"grid_t0_ns\":%lld,\"late_fraction\":%.4f,\"steps\":%llu,\"events_emitted\":%llu,"
                  "\"streams_started\":%llu,\"streams_finished\":%llu,\"late_steps\":%llu,\"missed_steps\":%llu,"
                  "\"emit_lateness_max_s\":%.9f,\"emit_lateness_mean_s\":%.9f,\"emit_lateness_p50_s\":%.6f,"
                  "\"emit_lateness_p99_s\":%.6f,\"wake_lateness_max_s\":%.9f}",
                  (double)g_step / 1e9, g_threads, (long long)g_t0, g_late_frac, (unsigned long long)steps,
                  (unsigned long long)events, (unsigned long long)started, (unsigned long long)finished,
                  (unsigned long long)late, (unsigned long long)missed, (double)emax / 1e9,
                  steps ? esum / (double)steps / 1e9 : 0.0, qv[0], qv[1], (double)wmax / 1e9);
  pthread_mutex_unlock(&g_stats_mu);
}

static void stats_reset(void) {
  for (int i = 0; i < g_threads; i++) {
    stats_t *s = &g_th[i].st;
    pthread_mutex_lock(&s->mu);
    s->steps = s->events = s->streams_started = s->streams_finished = s->late_steps = s->missed_steps = 0;
    s->emit_late_max = s->wake_late_max = 0;
    s->emit_late_sum = 0;
    memset(s->hist, 0, sizeof s->hist);
    pthread_mutex_unlock(&s->mu);
  }
}

static void bad_request(conn_t *c, const char *msg) {
  char body[512];
  int n = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"code\":400}}", msg);
  respond(c, 400, "application/json", body, (size_t)n);
}

static void generate(thread_t *t, conn_t *c, const char *body, size_t n) {
  const char *p = find_key(body, n, "\"stream\"");
  if (p && !strncmp(p, "false", 5)) {
    bad_request(c, "the native event server streams only (stream: true)");
    return;
  }
  c->max_new = 128;
  if ((p = find_key(body, n, "\"max_new_tokens\""))) c->max_new = strtol(p, NULL, 10);
  if (c->max_new < 1) {
    bad_request(c, "max_new_tokens must be an integer >= 1");
    return;
  }
  c->prompt_tokens = 0;
  if ((p = find_key(body, n, "\"input_ids\"")) && *p == '[') {
    const char *q = p + 1;
    int any = 0;
    for (; q < body + n && *q != ']'; q++) {
      if (*q == ',') c->prompt_tokens++;
      else if (*q >= '0' && *q <= '9') any = 1;
    }
    c->prompt_tokens += any;
  }
  c->rid[0] = 0;
  if ((p = find_key(body, n, "\"rid\"")) && *p == '"') {
    const char *q = p + 1;
    size_t k = 0;
    while (q < body + n && *q != '"' && k < RID_MAX - 1) {
      if (*q == '\\' && q + 1 < body + n) c->rid[k++] = *q++;
      if (k < RID_MAX - 1) c->rid[k++] = *q++;
    }
    c->rid[k] = 0;
  }
  if (!c->rid[0]) snprintf(c->rid, RID_MAX, "nes-%llu", (unsigned long long)__atomic_add_fetch(&g_rid_seq, 1, 0));
  static const char head[] =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  buf_add(&c->out, head, sizeof head - 1);
  c->n_out = 0;
  c->streaming = 1;
  pthread_mutex_lock(&t->st.mu);
  t->st.streams_started++;
  pthread_mutex_unlock(&t->st.mu);
  activate(t, c);
}

/* Parse and answer every complete request in the input buffer (none while a stream runs). */
static int handle_input(thread_t *t, conn_t *c) {
  while (!c->streaming && c->in.len > c->in.off) {
    char *start = c->in.p + c->in.off;
    size_t avail = c->in.len - c->in.off;
    char *hend = memmem(start, avail, "\r\n\r\n", 4);
    if (!hend) return avail > 65536 ? -1 : 0;
    size_t hlen = (size_t)(hend - start) + 4;
    long clen = 0;
    c->close_after = 0;
    for (char *line = memchr(start, '\n', hlen); line && line < hend; line = memchr(line + 1, '\n', (size_t)(hend - line))) {
      if (!strncasecmp(line + 1, "content-length:", 15)) clen = strtol(line + 16, NULL, 10);
      if (!strncasecmp(line + 1, "connection:", 11)) {
        char *v = line + 12;
        while (*v == ' ') v++;
        if (!strncasecmp(v, "close", 5)) c->close_after = 1;
      }
    }
    if (clen < 0 || clen > MAX_REQ) return -1;
    if (avail < hlen + (size_t)clen) return 0;
    char *body = start + hlen;
    c->arrival_ns = now_ns();
    c->in.off += hlen + (size_t)clen;
    int post = !strncmp(start, "POST ", 5);
    char *path = strchr(start, ' ');
    if (!path) return -1;
    path++;
    size_t plen = strcspn(path, " ?\r\n");
#define IS(s) (plen == strlen(s) && !strncmp(path, s, plen))
    if (post && IS("/generate")) {
      generate(t, c, body, (size_t)clen);
    } else if (IS("/stats") || IS("/server_info") || IS("/get_server_info")) {
      char js[2048];
      int n;
      stats_json(js, sizeof js, &n);
      if (!IS("/stats")) { /* SGLang-style wrapper: counters also as internal_states[0] */
        char js2[4096];
        int m = snprintf(js2, sizeof js2,
                         "{\"model_path\":\"dsv4h/native-event-server\",\"dsv4h_native_event_server\":%.*s,"
                         "\"internal_states\":[%.*s]}", n, js, n, js);
        respond(c, 200, "application/json", js2, (size_t)m);
      } else {
        respond(c, 200, "application/json", js, (size_t)n);
      }
    } else if (IS("/stats/reset")) {
      stats_reset();
      respond(c, 200, "application/json", "{\"reset\":true}", 14);
    } else if (IS("/health") || IS("/health_generate")) {
      respond(c, 200, "text/plain", "ok", 2);
    } else if (IS("/v1/models")) {
      static const char m[] = "{\"object\":\"list\",\"data\":[{\"id\":\"dsv4h/native-event-server\",\"object\":\"model\"}]}";
      respond(c, 200, "application/json", m, sizeof m - 1);
    } else if (IS("/get_model_info")) {
      static const char m[] = "{\"model_path\":\"dsv4h/native-event-server\",\"is_generation\":true}";
      respond(c, 200, "application/json", m, sizeof m - 1);
    } else {
      static const char m[] = "{\"error\":{\"message\":\"not found\",\"code\":404}}";
      respond(c, 404, "application/json", m, sizeof m - 1);
    }
#undef IS
  }
  if (c->in.off == c->in.len) c->in.off = c->in.len = 0;
  return conn_flush(t, c) < 0 ? 1 : 0;
}

static void conn_close(thread_t *t, conn_t *c) {
  if (c->fd < 0) return;
  deactivate(t, c);
  epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
  c->streaming = 0;
  if (t->n_dead == t->cap_dead) {
    t->cap_dead = t->cap_dead ? 2 * t->cap_dead : 64;
    t->dead = realloc(t->dead, (size_t)t->cap_dead * sizeof *t->dead);
    if (!t->dead) die("realloc");
  }
  t->dead[t->n_dead++] = c;
}

static void free_dead(thread_t *t) {
  for (long i = 0; i < t->n_dead; i++) {
    free(t->dead[i]->in.p);
    free(t->dead[i]->out.p);
    free(t->dead[i]);
  }
  t->n_dead = 0;
}

static void on_readable(thread_t *t, conn_t *c) {
  for (;;) {
    buf_reserve(&c->in, 65536);
    ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
    if (n > 0) {
      c->in.len += (size_t)n;
      if ((size_t)n < 65536) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    conn_close(t, c); /* EOF or error: a client that goes away aborts its stream */
    return;
  }
  if (handle_input(t, c) < 0) conn_close(t, c);
}

static void *thread_main(void *arg) {
  thread_t *t = arg;
  struct epoll_event evs[512];
  for (;;) {
    int n = epoll_wait(t->epfd, evs, 512, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &g_tag_timer) {
        step(t);
        /* connections whose stream ended may hold a next request already */
      } else if (tag == &g_tag_listen) {
        for (;;) {
          int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conn_t *c = calloc(1, sizeof *c);
          if (!c) die("calloc");
          c->fd = fd;
          c->active_idx = -1;
          struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
          if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl add");
        }
      } else {
        conn_t *c = tag;
        if (c->fd < 0) continue; /* closed earlier in this batch */
        if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
          conn_close(t, c);
          continue;
        }
        if (evs[i].events & EPOLLOUT) {
          if (conn_flush(t, c) < 0) continue;
        }
        if (evs[i].events & (EPOLLIN | EPOLLRDHUP)) on_readable(t, c);
      }
    }
    free_dead(t);
  }
  return NULL;
}

static int listen_on(const char *host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "bad --host %s (IPv4 only)\n", host);
    exit(2);
  }
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  if (listen(fd, 4096) < 0) die("listen");
  return fd;
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1", *ready = NULL;
  int port = 0;
  double step_ms = 20.0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "option %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--host")) host = v;
    else if (!strcmp(a, "--step-ms")) step_ms = atof(v);
    else if (!strcmp(a, "--threads")) g_threads = atoi(v);
    else if (!strcmp(a, "--ready-file")) ready = v;
    else if (!strcmp(a, "--late-frac")) g_late_frac = atof(v);
    else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  if (step_ms <= 0 || g_threads < 1 || g_threads > MAX_THREADS) {
    fprintf(stderr, "--step-ms must be > 0 and --threads in 1..%d\n", MAX_THREADS);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  g_step = (int64_t)(step_ms * 1e6 + 0.5);
  g_t0 = now_ns();
  for (int i = 0; i < g_threads; i++) {
    thread_t *t = &g_th[i];
    t->id = i;
    pthread_mutex_init(&t->st.mu, NULL);
    t->lfd = listen_on(host, port);
    if (port == 0) {
      struct sockaddr_in a;
      socklen_t len = sizeof a;
      getsockname(t->lfd, (struct sockaddr *)&a, &len);
      port = ntohs(a.sin_port);
    }
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t->epfd < 0 || t->tfd < 0) die("epoll/timerfd");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &g_tag_listen};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->lfd, &ev);
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = &g_tag_timer};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->tfd, &tev);
  }
  for (int i = 0; i < g_threads; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, thread_main, &g_th[i])) die("pthread_create");
  }
  char url[128];
  snprintf(url, sizeof url, "http://%s:%d", host, port);
  printf("dsv4h-native-event-server listening on %s (step %.3f ms, %d threads)\n", url, step_ms, g_threads);
  fflush(stdout);
  if (ready) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", ready);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", url) < 0 || fclose(f) || rename(tmp, ready)) die("ready file");
  }
  for (;;) pause();
}
