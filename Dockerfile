# One image for every agenthub service. The default command is bucket-sync on $PORT
# (7860, a Hugging Face Docker Space's app_port); compose.yaml runs the other services
# from the same image with their own commands:
#   agenthub statehub serve --host 0.0.0.0 --port 8100
#   agenthub hubcore serve --host 0.0.0.0 --port 8200      (follows HUBCORE_STATEHUB_URL)
#   agenthub hubcore follow                                 (a follower without the API)
#   agenthub bucketsync serve --host 0.0.0.0 --port 8300 --workers N   (N > 1: Redis bus)
#   agenthub dashboard serve http://bucketsync:8300 --host 0.0.0.0 --port 8400
# docs/deploy.md is the operations guide.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=7860

# UID 1000 is the user a Hugging Face Space runs as; files it writes go under its home.
RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app

COPY --chown=user pyproject.toml README.md ./
COPY --chown=user src ./src
RUN pip install --no-cache-dir .

USER user
ENV HOME=/home/user \
    BUCKETSYNC_DATA_DIR=/home/user/var/bucketsync
EXPOSE 7860

# HEALTHCHECK_URL names the service's health route (compose sets it per service); the
# default is bucket-sync's on $PORT.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(os.environ.get('HEALTHCHECK_URL') or 'http://127.0.0.1:%s/v1/healthz' % os.environ.get('PORT', '7860'), timeout=4)"

CMD ["sh", "-c", "exec agenthub bucketsync serve --host 0.0.0.0 --port \"${PORT:-7860}\""]
