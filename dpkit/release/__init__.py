"""The release path: the wire every tensor crosses to the server, releases, the server's view."""
