"""The server's dashboard: `/dashboard` (the page, `sglr/http/dashboard/`), `/dashboard/data` (one
bounded JSON snapshot the page polls). Samples are taken only when the page polls, so nobody
watching costs the engine nothing; docs/dashboard.md."""
