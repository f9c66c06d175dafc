"""The request's way in and out: the front door, security headers, compression, static files, the page cache, error
pages, downloads, the readers of request values and the base forms; `pipeline` puts them in order."""
