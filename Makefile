# Two commands set up everything on a fresh machine with python3 and make:
#   make demo   create .venv, install, run specs/lab5.yaml on whatever device is here, print the summary
#   make test   the whole test suite (installs its tools first)
#   make dashboard   the results dashboard (the shipped runs, or RESULTS=dir-or-gs://bucket/prefix)
#   make docs        the docs site on http://localhost:8000 (mkdocs.yml; make test builds it with --strict)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo dashboard docs results-pages screenshots test test-tools clean clean-tools render submit deploy nightly bench-runner

# pip is quiet (-q) and the first install takes minutes: say what it does first (the newcomer walk's took 118 s)
$(INSTALLED): pyproject.toml
	@echo "creating $(VENV) and installing this project with JAX, pandas and Streamlit: about 2 minutes on a fresh machine, quiet until done"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

DEMO_RESULTS ?= results
DEMO_SPEC ?= specs/lab5.yaml
DEMO_SPOOL ?= build/spool
# the demo's spool lives in the checkout (build/spool), so `make clean` removes it; other runs spool to ~/.cache/attnbench
demo: $(INSTALLED)
	$(BIN)/attnbench run $(DEMO_SPEC) --out $(DEMO_RESULTS)/ --spool $(DEMO_SPOOL) --budget 0.2
	@echo "see it: make dashboard (the runs in $(DEMO_RESULTS)/), or $(BIN)/attnbench show RUN_ID ($(BIN)/attnbench runs lists them)"

# the results dashboard on http://localhost:8501: attnbench dashboard's default ($ATTNBENCH_RESULTS, else the runs in
# results/, make demo's, once there is one, else the shipped examples/results); RESULTS=dir-or-gs://bucket/prefix
# picks other runs
dashboard: $(INSTALLED)
	$(BIN)/attnbench dashboard $(if $(RESULTS),--results $(RESULTS))

# the runner's own speed: SPEC cold and warm (compilation cache) as whole processes (docs/benchmarks.md)
bench-runner: $(INSTALLED)
	$(BIN)/python scripts/bench_runner.py $(or $(BENCH_SPEC),specs/lab5.yaml) --ahead-off

# the docs site (mkdocs.yml, docs/): served with live reload; the spec and variant references are generated as it builds
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# the H200 results pages (docs/results/): tables and figures generated from the committed runs
results-pages: $(INSTALLED)
	$(BIN)/python scripts/results_pages.py

# the screenshots in docs/screenshots/, taken anew in chromium (test-tools installs it) from the committed runs and docs
screenshots: $(INSTALLED) test-tools
	$(BIN)/python scripts/screenshots.py

test-tools:
	bash scripts/install-test-tools.sh

# pytest-xdist: TEST_WORKERS processes (TEST_WORKERS=0: one, as `.venv/bin/pytest` runs), each given whole files
# (--dist loadfile), so a module's fixtures start once; many tests wait on processes, servers and signals, and a
# second worker fills those waits (docs/benchmarks.md, "The suite on two workers")
TEST_WORKERS ?= 2
test: $(INSTALLED) test-tools
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# GKE (docs/gke.md). Every value defaults to what terraform/ made; each can be given on the line.
#   make deploy [IAP_DOMAIN=dash.example.com]         namespace, service accounts, dashboard (once per cluster)
#   make submit SPEC=specs/lab5.yaml SHARDS=4 [GPU=h100] [RUN=job-name]
#   make render SPEC=... SHARDS=... [NIGHTLY=1]        write build/k8s/RUN/{platform,job}.yaml (RENDER_DIR), apply nothing;
#                                                      NIGHTLY=1: nightly.yaml too, what make nightly would apply (0, or
#                                                      none, the default: not; as V=1 in Linux's Makefiles)
#   make nightly SPEC=specs/lab5.yaml [GPU=h100] [SCHEDULE="0 3 * * *"]   a CronJob: run SPEC every night, compare it
#                                                      with the run before, fail the Job on a regression
SPEC ?= k8s/base/spec.yaml
SHARDS ?= 1
GPU ?= l4
KUBECTL ?= kubectl
# the runner's tag, this commit's short hash: asked of git once, the first time a value below needs it (IMAGE reads it
# several times), where git ran on each read; never where TAG is given, on the line or in the environment
ifeq ($(origin TAG),undefined)
TAG = $(eval TAG := $$(shell git rev-parse --short HEAD))$(TAG)
endif
# terraform/'s outputs, read once, the first time a value below needs one (none where each is given on the line):
# k8s/terraform_output.py prints NAME=VALUE words (plain words alone: why not `output -raw`), then terraform:ran, failed
# or missing (a colon, which no output's name holds); $(call terraform_output,NAME) is NAME's value, empty where
# terraform has none, and TERRAFORM_ANSWER how terraform answered
TERRAFORM_OUTPUTS = $(eval TERRAFORM_OUTPUTS := $$(shell $$(PYTHON) k8s/terraform_output.py))$(TERRAFORM_OUTPUTS)
terraform_output = $(patsubst $(1)=%,%,$(filter $(1)=%,$(TERRAFORM_OUTPUTS)))
TERRAFORM_ANSWER = $(patsubst terraform:%,%,$(filter terraform:%,$(TERRAFORM_OUTPUTS)))
REGISTRY ?= $(call terraform_output,image_repository)
RESULTS_URI ?= $(call terraform_output,results_uri)
DASHBOARD_IP_NAME ?= $(call terraform_output,dashboard_ip_name)
# the runner by digest, looked up in Artifact Registry, so each node pulls it once (docs/gke.md, "Build and push"):
# gcloud's answer, read once, is the digest or its error's first line without its ERROR: (command) prefix, which make
# says in its own line where it stops (the rest of gcloud's error, 12 lines logged out, is not shown); read only where
# IMAGE is not given and REGISTRY is known
RUNNER_TAGGED = $(REGISTRY)/attnbench:runner-$(TAG)
RUNNER_FOUND = $(eval RUNNER_FOUND := $$(shell gcloud artifacts docker images describe $$(RUNNER_TAGGED) \
	--format='value(image_summary.digest)' 2>&1 \
	| sed -n -e '/^sha256:/{p;q}' -e '/^ERROR: /{s/^ERROR: [^ ]* //;p;q}'))$(RUNNER_FOUND)
RUNNER_DIGEST ?= $(filter sha256:%,$(RUNNER_FOUND))
IMAGE ?= $(if $(REGISTRY),$(RUNNER_TAGGED)$(addprefix @,$(RUNNER_DIGEST)))
# what a render needs that neither terraform/ nor the command line gave: make stops at once, in one line that says why
# terraform gave none (TERRAFORM_ANSWER; empty where the script that asks it could not run)
NOT_GIVEN = $(strip $(if $(IMAGE),,REGISTRY=) $(if $(RESULTS_URI),,RESULTS_URI=))
NO_OUTPUTS.ran = terraform/ has no outputs here (apply it first)
NO_OUTPUTS.failed = `terraform -chdir=terraform output` fails (run it to see why)
NO_OUTPUTS.missing = terraform is not on PATH
NO_OUTPUTS. = terraform/'s outputs are unread: `$(PYTHON) k8s/terraform_output.py` did not answer (give PYTHON= a Python 3)
# submit and nightly apply a Job that pulls IMAGE: where the lookup found no image (never pushed, or gcloud not logged
# in), its pods would wait in ImagePullBackOff for the Job's 6 hours; RUNNER_DIGEST= (offline) applies the tag alone.
# An IMAGE or RUNNER_DIGEST given (on the line, or in the environment) is taken as it is: no lookup runs
NO_DIGEST = no digest for $(IMAGE): gcloud artifacts docker images describe said \
	$(if $(RUNNER_FOUND),"$(RUNNER_FOUND)",nothing) — log gcloud in (gcloud auth login) or push the runner \
	(docs/gke.md, step 2), or give RUNNER_DIGEST= to apply the tag unpinned (offline)
# checked as make reads this file, before the .venv these targets' recipes need (about 2 minutes to install on a fresh
# clone): a value missing stops make at once
ifneq ($(filter render submit deploy nightly,$(MAKECMDGOALS)),)
ifneq ($(NOT_GIVEN),)
$(error $(NO_OUTPUTS.$(TERRAFORM_ANSWER)) — or give $(subst = ,= and ,$(NOT_GIVEN)))
endif
endif
ifneq ($(filter submit nightly,$(MAKECMDGOALS)),)
ifeq ($(origin IMAGE) $(origin RUNNER_DIGEST),file file)
ifeq ($(RUNNER_DIGEST),)
$(error $(NO_DIGEST))
endif
endif
endif
ifneq ($(filter render,$(MAKECMDGOALS)),)
$(if $(filter-out 0 1,$(NIGHTLY)),$(error NIGHTLY=$(NIGHTLY): give NIGHTLY=1 to render the nightly too, or NIGHTLY=0))
endif
RENDER_DIR ?= build/k8s
RENDER = $(BIN)/python k8s/render.py --spec $(SPEC) --shards $(SHARDS) --gpu $(GPU) --results $(RESULTS_URI) \
	--image $(IMAGE) --kubectl $(KUBECTL) --out $(RENDER_DIR) $(if $(RUN),--run-id $(RUN)) \
	$(if $(DASHBOARD_IMAGE),--dashboard-image $(DASHBOARD_IMAGE)) \
	$(if $(IAP_DOMAIN),--iap-domain $(IAP_DOMAIN) --dashboard-ip-name "$(DASHBOARD_IP_NAME)")
NIGHTLY_RENDER = --nightly $(if $(SCHEDULE),--schedule "$(SCHEDULE)")

render: $(INSTALLED)
	$(BIN)/attnbench validate $(SPEC)
	$(RENDER) $(if $(filter 1,$(NIGHTLY)),$(NIGHTLY_RENDER))

submit: $(INSTALLED)
	$(BIN)/attnbench validate $(SPEC)
	$(RENDER) --apply job

deploy: $(INSTALLED)
	$(RENDER) --apply platform

nightly: $(INSTALLED)
	$(BIN)/attnbench validate $(SPEC)
	$(RENDER) $(NIGHTLY_RENDER) --apply nightly

# what make made in this checkout: the venv, the demo's results and spool (build/spool), rendered manifests,
# test output; ~/.cache/attnbench (other runs' spools, JAX's compilation cache) is shared and stays, and so do the
# test tools (.venv-tools: gigabytes, TransformerEngine compiled, minutes to rebuild), which clean-tools removes
clean:
	rm -rf $(VENV) results build test-artifacts .pytest_cache

clean-tools:
	rm -rf .venv-tools
