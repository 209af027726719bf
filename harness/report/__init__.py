"""Reports: frozen snapshots of archives, figures and self-contained HTML/Markdown/LaTeX."""
