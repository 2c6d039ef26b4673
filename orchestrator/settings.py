"""Process-wide settings, read from the environment (``ORCH_*``) and CLI flags.

Built once in an entry point (``cli/main.py``, ``api/app.py``'s factory) and passed down; nothing here runs at
import time.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DB_URL = "sqlite:///./orch.db"


class Settings(BaseSettings):
    """orch's settings.

    Environment variables carry the ``ORCH_`` prefix: ``ORCH_DB_URL``, ``ORCH_INVENTORY``, ``ORCH_API_TOKEN``,
    ``ORCH_API_READ_TOKEN``, ``ORCH_CORS_ORIGINS`` (comma list), ``ORCH_CONNECT_TIMEOUT_S``,
    ``ORCH_COMMAND_TIMEOUT_S``, ``ORCH_MAX_CONCURRENCY``, ``ORCH_SUITE_DIR``.
    """

    model_config = SettingsConfigDict(env_prefix="ORCH_", extra="ignore")

    db_url: str = DEFAULT_DB_URL
    inventory: Path = Path("inventory.yaml")
    api_token: SecretStr | None = None
    api_read_token: SecretStr | None = None
    cors_origins: str = ""
    connect_timeout_s: float = Field(default=10.0, gt=0, description="TCP + SSH handshake + auth deadline, s")
    command_timeout_s: float = Field(default=60.0, gt=0, description="default deadline per remote command, s")
    max_concurrency: int = Field(default=64, ge=1, description="hosts contacted at once")
    suite_dir: Path | None = None

    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]
