"""HTTP plumbing shared by `sglr-server` (`sglr.server`) and `sglr-router` (`sglr.router`): the
one error shape and the one mapping of sglr's typed errors to HTTP statuses (`errors`), request
bodies and typed field reads (`request`), JSON out, server-sent events, clients that go away,
bearer auth, the Starlette app shape both programs build (`app`), and binding and announcing
the port they listen on (`listen`). It knows no engine and no API: nothing here imports the
programs above it."""
