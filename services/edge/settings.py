"""The browser edge's own settings (the shared ones, services.common.settings.Settings:
the upstream services' addresses, TLS, logging)."""

from __future__ import annotations

from pydantic import Field

from services.common.settings import SectionSettings

DEFAULT_PORT = 8080


class EdgeSettings(SectionSettings):
    """Read by the browser edge only (``kishpa serve edge``; ``kishpa run`` too)."""

    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535, validation_alias="KISHPA_EDGE_PORT")
    """The edge's HTTP port (HTTP/1.1 and h2c, or HTTPS with a certificate)."""
    host: str = Field(default="0.0.0.0", validation_alias="KISHPA_EDGE_HOST")
    """The address the edge binds (``kishpa run``: ``127.0.0.1``)."""
    cors_origins: str = Field(default="", validation_alias="KISHPA_EDGE_CORS_ORIGINS")
    """Comma-separated origins that may call the edge from another site, ``*`` for any;
    unset: the same origin only (others get ``403``)."""
    web_root: str = Field(
        default="",
        validation_alias="KISHPA_EDGE_WEB_ROOT",
        json_schema_extra={"shown_default": "`web/dist` beside the code"},
    )
    """The built web client the edge serves at ``/`` (the image's is ``/opt/kishpa-web``)."""

    def origins(self) -> frozenset[str]:
        """The allowed cross-site origins, parsed."""
        return frozenset(o.strip() for o in self.cors_origins.split(",")) - {""}
