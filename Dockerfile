# syntax=docker/dockerfile:1
# attnbench images (docs/gke.md, step 2; amd64 even from an arm64 workstation, for the GKE nodes):
#   docker buildx build --platform linux/amd64 --target runner --build-arg ATTNBENCH_GIT_SHA="$SHA" \
#     -t REGISTRY/attnbench:runner-TAG --push .
#       JAX + cuDNN + TransformerEngine, for GPU nodes; SHA (the commit, as docs/gke.md sets it) is what its records
#       give as git_sha, null when the build arg is left out
#   docker buildx build --platform linux/amd64 --target dashboard -t REGISTRY/attnbench:dashboard-TAG --push .
#       the Streamlit dashboard, no CUDA
#
# The GPU stack is PyPI's CUDA 12 wheels, every package pinned in docker/runner-requirements.txt, with
# TransformerEngine's JAX extension (PyPI ships it as source only) compiled here against that very JAX. CUDA 12 wheels need an NVIDIA driver >= 525 (JAX's install
# docs), which both GKE driver choices for L4 nodes meet. Why not NVIDIA's JAX container: docs/gke.md, "The image".

# ---- build: /opt/venv with the pinned GPU stack, TransformerEngine's JAX extension and attnbench -------------------
FROM nvidia/cuda:12.9.1-cudnn-devel-ubuntu24.04 AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Ubuntu's Python is what the runner stage runs; its package revisions move with security updates, so they are not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 python3.12-venv python3.12-dev \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/venv/bin:$PATH
# The runner's whole Python environment, every package pinned in one list (docker/runner-requirements.txt, written by
# docker/lock_runner.py; tests/test_runner_image.py installs the same file), and the tools that compile TE's extension.
COPY docker/runner-requirements.txt /src/docker/
RUN python3.12 -m venv /opt/venv \
    && pip install --no-cache-dir pip==25.3 setuptools==80.9.0 wheel==0.45.1 pybind11==3.0.1 cmake==4.1.2 ninja==1.13.0 \
    && pip install --no-cache-dir -r /src/docker/runner-requirements.txt
# TE's JAX extension, which PyPI ships as source only, compiled against that very JAX at the list's transformer-engine
# version, for the cluster's GPUs only: L4 (sm_89) and H100 (sm_90). TE 2.20.2 refuses cuDNN headers older than 9.12
# (common/cudnn_min_version.h); this base's system cuDNN in /usr/include is older (9.10), so the venv's cuDNN wheel's
# headers come first on CPLUS_INCLUDE_PATH, the cuDNN the image runs. scripts/build_te_jax.py repeats this line in
# `make test` (tests/test_runner_image.py), outside Docker.
RUN NVTE_FRAMEWORK=jax NVTE_CUDA_ARCHS="89;90" MAX_JOBS=4 CUDA_HOME=/usr/local/cuda \
    CPLUS_INCLUDE_PATH=/opt/venv/lib/python3.12/site-packages/nvidia/cudnn/include \
    pip install --no-cache-dir --no-build-isolation -c /src/docker/runner-requirements.txt "transformer-engine[jax]"
COPY pyproject.toml README.md /src/
COPY runner /src/runner
COPY dashboard /src/dashboard
RUN pip install --no-cache-dir -c /src/docker/runner-requirements.txt "/src[cuda12,gcs,te,report]" \
    && pip check

# ---- runner: the venv on CUDA's base image (no toolkit; the driver comes from the GKE node) -------------------------
FROM nvidia/cuda:12.9.1-base-ubuntu24.04 AS runner
# tini is PID 1 (the ENTRYPOINT below), the runner its child: the kernel drops a signal to a PID 1 that has no handler
# for it, so a SIGTERM that came while Python started, before runner.termination installs its handler, was lost, and
# the pod ran on until the grace period's SIGKILL; tini forwards it, and a runner not yet handling it ends at once.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 attnbench \
    && useradd --uid 10001 --gid 10001 --home-dir /home/attnbench --create-home --shell /usr/sbin/nologin attnbench
COPY --from=build /opt/venv /opt/venv
# Every CUDA library comes from the venv's wheels; the base image adds only the node's driver on LD_LIBRARY_PATH.
# TransformerEngine 2.20.2 loads cuDNN, NVRTC and curand itself at import (transformer_engine/common/__init__.py).
# Finding neither NVRTC nor curand "on the system", it then also insists on cudart under nvidia/cudart, where CUDA
# 12's wheel has nvidia/cuda_runtime, and fails; the *_HOME variables point its system lookup at the wheels instead.
# Its core library then needs cuBLAS, the CUDA runtime and NCCL, which it links without a search path: the loader
# finds them here, the same files JAX loads.
ENV NVIDIA_WHEELS=/opt/venv/lib/python3.12/site-packages/nvidia
ENV NVRTC_HOME=${NVIDIA_WHEELS}/cuda_nvrtc \
    CURAND_HOME=${NVIDIA_WHEELS}/curand \
    LD_LIBRARY_PATH=${NVIDIA_WHEELS}/cublas/lib:${NVIDIA_WHEELS}/cuda_runtime/lib:${NVIDIA_WHEELS}/nccl/lib:${LD_LIBRARY_PATH}
# NVIDIA_REQUIRE_CUDA describes the base image's own CUDA 12.9; the venv brings its CUDA as wheels, which need only a
# driver >= 525, so the container runtime is told not to enforce the base image's floor.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HOME=/home/attnbench \
    NVIDIA_DISABLE_REQUIRE=true
# Import what a pod imports at start (TE's libraries and JAX extension, every variant), as tests/test_runner_image.py
# does offline; the CUDA toolkit's stub stands in for the node's libcuda, for this step only.
RUN --mount=type=bind,source=docker/check_runner_env.py,target=/tmp/check_runner_env.py \
    --mount=type=bind,from=build,source=/usr/local/cuda/lib64/stubs,target=/tmp/cuda-stubs \
    mkdir /tmp/driver \
    && ln -s /tmp/cuda-stubs/libcuda.so /tmp/driver/libcuda.so.1 \
    && LD_LIBRARY_PATH=/tmp/driver:$LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 python /tmp/check_runner_env.py --te-jax \
    && rm -r /tmp/driver
# The published figures that compare --report (the nightly's report) draws beside the runs (runner/published.py,
# which otherwise looks in a checkout's docs/reference, not in the image), as the dashboard stage has them.
COPY docs/reference /opt/attnbench/reference
ENV ATTNBENCH_REFERENCE=/opt/attnbench/reference
# The commit built from, which every record's manifest gives as git_sha (runner/machine.py; the image has no git):
# declared after the slow steps, so a new commit rebuilds none of them. Built without it, git_sha is null.
ARG ATTNBENCH_GIT_SHA
ENV ATTNBENCH_GIT_SHA=${ATTNBENCH_GIT_SHA}
USER 10001:10001
WORKDIR /home/attnbench
# A batch container: Kubernetes watches the exit code (k8s/base/runner-job.yaml), there is no server to probe.
HEALTHCHECK NONE
ENTRYPOINT ["tini", "--", "attnbench"]
CMD ["--help"]

# ---- dashboard: the results dashboard on a slim Python, no CUDA -------------------------------------------------------
FROM python:3.12-slim-bookworm AS dashboard
# tini is PID 1 here too (the ENTRYPOINT below), for the runner stage's reason: streamlit as PID 1 lost a SIGTERM (a
# rollout's, a node drain's) that came before it installed its handler, and ran on to the grace period's SIGKILL.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 attnbench \
    && useradd --uid 10001 --gid 10001 --home-dir /home/attnbench --create-home --shell /usr/sbin/nologin attnbench
COPY pyproject.toml README.md /src/
COPY runner /src/runner
COPY dashboard /src/dashboard
# Every package pinned (docker/dashboard-requirements.txt, written by docker/lock_dashboard.py): a rebuild installs
# what the last one did.
COPY docker/dashboard-requirements.txt /src/docker/
RUN pip install --no-cache-dir -c /src/docker/dashboard-requirements.txt "/src[dashboard]" \
    && pip check \
    && rm -rf /src
# The published figures the Latency, Throughput and Leaderboard views draw beside the runs (runner/published.py).
COPY docs/reference /opt/attnbench/reference
ENV PYTHONUNBUFFERED=1 \
    HOME=/home/attnbench \
    ATTNBENCH_REFERENCE=/opt/attnbench/reference
USER 10001:10001
WORKDIR /home/attnbench
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
ENTRYPOINT ["tini", "--", "attnbench"]
CMD ["dashboard", "--address", "0.0.0.0", "--port", "8501"]
