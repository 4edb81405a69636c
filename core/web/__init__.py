"""The web, reached only by the web tools: the SSRF guard (:mod:`core.web.guard`), its
pinned client (:mod:`core.web.client`), page fetching (:mod:`core.web.fetch`) and search
providers (:mod:`core.web.search`)."""
