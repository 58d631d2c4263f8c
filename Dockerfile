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
# /dap/) on port 8080 and writes its log to /logs/$ROLE.log as well as to stderr.
FROM python:3.11-slim

ARG ROLE=leader
ENV ROLE=${ROLE} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY vdaf ./vdaf
COPY dap ./dap
COPY dp_policy ./dp_policy
COPY interop ./interop
COPY ppm ./ppm
RUN pip install --no-cache-dir . && mkdir -p /logs /data

EXPOSE 8080
CMD ["sh", "-c", "exec ppm interop serve --role \"$ROLE\" --host 0.0.0.0 --port 8080 --data-dir /data --log-dir /logs"]
