# kubehw.devices developer entry points. Everything runs from the pinned tools in .venv
# (created by `make setup`) with the test collections in .cache/collections.
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
REPORTS := $(ROOT)/.cache/reports
PYTHON ?= python3.11
# Tools and ansible-playbook find kubehw.devices (this checkout) and the test collections here.
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.cache/collections
export PATH := $(BIN):$(PATH)
# --durations: the slowest tests are named in every run, so the suite stays fast
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider --durations=10

.PHONY: help setup sanity units integration least-privilege lint roles test demo clean

help:
	@echo "make demo         set up, start the simulated cluster, run site.yml against it, print a summary"
	@echo "make test         setup + sanity + units + integration + lint + roles, then a summary table"
	@echo "make setup        .venv with pinned tools, Debian packages, test collections (idempotent)"
	@echo "make sanity       ansible-test sanity on a copy of the checkout (no ignore file)"
	@echo "make units        pytest tests/unit, the build/install test and the CI tooling tests"
	@echo "make integration  pytest tests/integration tests/simcluster (simulated cluster unless KUBECONFIG is set)"
	@echo "make least-privilege  the module integration suites as the least-privilege identity (rbac.yaml.j2)"
	@echo "make lint         ansible-lint --profile production"
	@echo "make roles        every molecule scenario"

setup:
	@PYTHON=$(PYTHON) bash $(ROOT)/scripts/setup.sh

sanity:
	@bash $(ROOT)/scripts/sanity.sh

# pytest's own exit code is kept in <stage>.rc: make turns every failure into 2, and
# scripts/run_tests.py must tell "tests failed" (1) from "no tests collected" (5).
define run_pytest
	@mkdir -p $(REPORTS)
	@echo "pytest $(2)"
	@rc=0; $(PYTEST) --junitxml=$(REPORTS)/$(1).xml $(2) || rc=$$?; echo $$rc >$(REPORTS)/$(1).rc; exit $$rc
endef

units:
	$(call run_pytest,units,tests/unit tests/test_build.py tests/test_ci_tooling.py)

integration:
	$(call run_pytest,integration,tests/integration tests/simcluster)

# The module suites again, with the modules running as the least-privilege identity of
# playbooks/templates/rbac.yaml.j2 (a token bound only to it), so a missing permission fails here.
least-privilege: export KUBEHW_IDENTITY := least-privilege
least-privilege:
	$(call run_pytest,least-privilege,tests/integration/test_k8s_node_extended_resource.py tests/integration/test_device_plugin_deploy.py tests/integration/test_info_and_smoke_test.py)

lint:
	$(BIN)/ansible-lint --profile production $(if $(CI),--nocolor)

roles:
	@mkdir -p $(REPORTS)
	$(if $(CI),NO_COLOR=1 PY_COLORS=0 ANSIBLE_NOCOLOR=1) $(BIN)/python $(ROOT)/scripts/run_molecule.py --results $(REPORTS)/roles.json

test:
	@$(PYTHON) $(ROOT)/scripts/run_tests.py --reports $(REPORTS)

demo: setup
	@if [ -f $(ROOT)/scripts/demo.sh ]; then \
		exec bash $(ROOT)/scripts/demo.sh; \
	elif [ -f $(ROOT)/tests/demo/__main__.py ] || [ -f $(ROOT)/tests/demo.py ]; then \
		exec $(BIN)/python -m tests.demo; \
	else \
		echo "demo not written yet: neither scripts/demo.sh nor tests/demo exists" >&2; exit 1; \
	fi

clean:
	rm -rf $(ROOT)/.cache/sanity $(REPORTS) $(ROOT)/tests/output
