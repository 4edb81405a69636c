"""The gateway's web surface: the web chat adapter wired from ``[web]``, the dashboard,
``/healthz`` and ``/metrics`` — all served by the web adapter's server."""
