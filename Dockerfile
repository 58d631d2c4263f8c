# One image per DAP role for the interop test design
# (draft-dcook-ppm-dap-interop-test-design-07): the role is a build argument, because the
# test runner passes no environment variables or volumes to the containers.
#
#   docker build --build-arg ROLE=leader    -t ppm-reference-interop-leader .
#   docker build --build-arg ROLE=helper    -t ppm-reference-interop-helper .
#   docker build --build-arg ROLE=client    -t ppm-reference-interop-client .
#   docker build --build-arg ROLE=collector -t ppm-reference-interop-collector .
#
# The container serves the test API (and, for the Aggregators, the DAP resources under
# /dap/ and, for Janus's interop driver, at the root too) on port 8080 and writes its
# log to /logs/$ROLE.log as well as to stderr.
#
# The test API: the interop design defines no authentication and a stock draft-07 runner
# sends none, so by default the container serves it unauthenticated
# (--allow-unauthenticated): run it only on the runner's private network, never publish
# port 8080. Give it a token to require one (then `ppm interop run --token` sends it):
#
#   docker run -e PPM_INTEROP_TOKEN=... ppm-reference-interop-leader
#
# Outside a container, `ppm interop serve` binds 127.0.0.1 and refuses a non-loopback
# --host without a token.
FROM python:3.11-slim

ARG ROLE=leader
ENV ROLE=${ROLE} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /app
COPY pyproject.toml setup.py MANIFEST.in README.md LICENSE ./
COPY ppm_reference ./ppm_reference
RUN pip install --no-cache-dir . && mkdir -p /logs /data

EXPOSE 8080
CMD ["sh", "-c", "exec ppm interop serve --role \"$ROLE\" --host 0.0.0.0 --port 8080 --allow-unauthenticated --data-dir /data --log-dir /logs"]
