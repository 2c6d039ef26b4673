# orch's results API image: `orch db upgrade` and `orch serve` (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md alembic.ini ./
COPY orchestrator ./orchestrator
COPY agents ./agents
COPY migrations ./migrations
COPY scripts/hatch_build.py ./scripts/hatch_build.py
RUN pip install ".[postgres]" && rm -rf /src

# The API never needs root; the wheel carries the migrations (orchestrator/migrations), so any working directory works.
RUN useradd --system --create-home --home-dir /home/orch orch
USER orch
WORKDIR /home/orch

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"
CMD ["orch", "serve", "--host", "0.0.0.0", "--port", "8000"]
