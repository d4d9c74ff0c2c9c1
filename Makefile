# kubehw.devices developer entry points. Everything runs from the pinned tools in .venv
# (created by `make setup`) with the test collections in .cache/collections.
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
REPORTS := $(ROOT)/.cache/reports
# The Python .venv is built on; unset, scripts/setup.sh picks Debian's python3.11 where present (built with
# optimisations), else python3.11 from PATH.
PYTHON ?=
# Tools and ansible-playbook find kubehw.devices (this checkout) and the test collections here.
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.cache/collections
export PATH := $(BIN):$(PATH)
# --durations: the slowest tests are named in every run, so the suite stays fast.
# --dist loadgroup: tests marked xdist_group('<name>') all go to one worker, so a module-scoped fixture
# that runs ansible-playbook for tens of CPU seconds (tests/unit/roles) runs once, not once per worker.
PYTEST_OPTS := -p no:cacheprovider --durations=10 --dist loadgroup
# pytest-xdist workers of every pytest stage. Each integration test brings its own Node objects, namespaces and
# identities on the session's real control plane, and its ansible-playbook runs in its own temporary directory, so
# tests share nothing; much of their time is waiting (rollouts, watches), which a second worker fills.
# PYTEST_JOBS=0 runs in one process (easier to debug).
PYTEST_JOBS ?= 2
# The integration stage's workers: two, each with a control plane of its own. Measured alone on two cores
# (2026-12-02): three workers 1,438 CPU-s in 891 s, two workers 1,234 CPU-s in 930 s: the third control plane and
# the contention cost more CPU than the third worker saves time, and `make test` is CPU-bound. A PYTEST_JOBS given
# on the command line or in the environment sets it too (PYTEST_JOBS=0: one process for every stage).
INTEGRATION_JOBS ?= $(if $(filter command line environment,$(origin PYTEST_JOBS)),$(PYTEST_JOBS),2)

.PHONY: help setup sanity units integration min-versions core-2.18 lint roles node test test-one demo clean

# Colour only on a terminal. When a recipe's stdout is a file or a pipe (`make test > log`, CI) every
# tool is told: NO_COLOR (molecule, ansible-lint and other rich/click tools), PY_COLORS (pytest),
# ANSIBLE_NOCOLOR/ANSIBLE_FORCE_COLOR (ansible-playbook, also the runs molecule starts: molecule
# forces colour on them whenever TERM names an xterm, tty or not).
PLAIN := if [ ! -t 1 ]; then export NO_COLOR=1 PY_COLORS=0 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0; fi;

# The module integration suites, whose tests marked floor run again with the minimum versions (in every run their
# modules act as the least-privilege identity: LEAST_PRIVILEGE_SUITES in tests/integration/conftest.py).
MODULE_SUITES := tests/integration/test_k8s_node_extended_resource.py tests/integration/test_device_plugin_deploy.py \
	tests/integration/test_info_and_smoke_test.py tests/integration/test_dra.py tests/integration/test_dra_driver_deploy.py
# `make min-versions`: a separate venv with the floors of meta/ee-requirements.txt and meta/runtime.yml's lowest
# ansible-core installed exactly. `make core-2.18`: the pinned libraries with ansible-core 2.18.
MIN_VENV := $(ROOT)/.cache/min-versions/venv
CORE_218_VENV := $(ROOT)/.cache/core-2.18/venv
CORE_218 := 2.18.19
# What the ansible-core stages run: the plugins' unit tests (the modules run in-process) and the inventory plugin's
# suite (cluster data planted as templates must stay strings on every ansible-core the collection supports), and, of
# the module integration suites, the tests marked floor (-m selects them and every test that is not an integration
# test): each module's life cycle and each path of the client library (transport, TLS and token, watches, faults,
# conflicts, dry runs, patches) run by ansible-playbook, so every supported ansible-core release runs every module
# against the real control plane. On 2.18 the modules' unit tests are left out: they run in-process on 2.17 and 2.19,
# which bracket it, and what a module decides there does not depend on the release (about 40 CPU seconds less).
# core-2.18 runs in one process with one control plane (a PYTEST_JOBS given on the command line or in the environment
# wins): measured alone (2026-12-02) with the floor tests, one process 110 CPU-s in 131 s, two workers 124 CPU-s in
# 90 s; the run is CPU-bound on two cores, and its lane ends before the integration lane either way.
CORE_218_JOBS ?= $(if $(filter command line environment,$(origin PYTEST_JOBS)),$(PYTEST_JOBS),0)
# What both ansible-core stages run on the control plane: the module suites' floor tests and the inventory suite (-m
# also selects every test that is not an integration test, so unit test folders given beside them run whole).
FLOOR_CLUSTER_SUITES := -m 'floor or not integration' $(MODULE_SUITES) tests/integration/test_inventory.py
CORE_SUITES := tests/unit/plugins/inventory tests/unit/plugins/filter $(FLOOR_CLUSTER_SUITES)
MIN_SUITES := tests/unit/plugins $(FLOOR_CLUSTER_SUITES)
# `make roles SCENARIOS="default container_runtime"` runs only those scenarios.
SCENARIOS ?=
# Scenarios run at a time by `make roles` (each boots its own target and spends much of its time waiting
# on dpkg, apt and systemd); their logs are printed whole, one after another. ROLES_JOBS=1: one at a time.
ROLES_JOBS ?= 2

# `make help` is the list of targets; tests/test_ci_tooling.py checks the README names the same ones.
help:
	@echo "make demo          set up, start a real control plane with stand-in kubelets, run site.yml against it, say per"
	@echo "                   node what it did"
	@echo "make test          every stage below (setup, sanity, units, integration, min-versions, core-2.18, lint, roles, node;"
	@echo "                   roles beside the others, each log printed whole in this order), then a summary"
	@echo "                   table ending with 'N passed, N failed'"
	@echo "make setup         .venv with pinned tools, Debian packages (system-wide, as root), test collections, the"
	@echo "                   Kubernetes binaries (../shared/k8s/bin, else the pinned release, downloaded and verified)"
	@echo "make sanity        ansible-test sanity on a copy of the checkout (no ignore file)"
	@echo "make units         pytest tests/unit, the build/install and release tests and the CI tooling tests"
	@echo "make integration   pytest tests/integration on a real control plane of release binaries, one per pytest worker"
	@echo "                   (state in .cache/real-control-plane), else the cluster of KUBECONFIG, else not run (and says"
	@echo "                   why); the module suites' modules run as the least-privilege identity of rbac.yaml.j2"
	@echo "make min-versions  plugin unit tests, the inventory suite and the module suites' floor tests with the lowest"
	@echo "                   ansible-core of meta/runtime.yml and the minimum kubernetes, urllib3 and jsonpatch of"
	@echo "                   meta/ee-requirements.txt (venv in .cache/min-versions)"
	@echo "make core-2.18     the inventory plugin's and filters' unit tests, the inventory suite and the module suites'"
	@echo "                   floor tests with ansible-core 2.18 (venv in .cache/core-2.18)"
	@echo "make lint          ansible-lint --profile production, antsibull-docs lint-collection-docs"
	@echo "make roles         every molecule scenario (extensions/molecule), two at a time (ROLES_JOBS);"
	@echo "                   SCENARIOS=\"a b\" runs only those"
	@echo "make node          the real-node suite: a real kubelet and containerd (Debian sid in systemd-nspawn, containerd set"
	@echo "                   up by the collection's roles) run Kubernetes' test device plugin and DRA test driver through"
	@echo "                   the modules; says why when this machine cannot run it"
	@echo "make test-one      TEST=path[::name] (any pytest selection, ARGS for more options): one test, one process,"
	@echo "                   on a real control plane of its own as make integration starts them"
	@echo "make clean         remove test output and reports; says what it leaves (.venv, caches, system packages)"
	@echo "make help          this list"

setup:
	@PYTHON=$(PYTHON) bash $(ROOT)/scripts/setup.sh

sanity:
	@bash $(ROOT)/scripts/sanity.sh

# pytest's own exit code is kept in <stage>.rc: make turns every failure into 2, and
# scripts/run_tests.py must tell "tests failed" (1) from "no tests collected" (5).
# $(3): the Python to run pytest with (default .venv's).
define run_pytest
	@mkdir -p $(REPORTS)
	@echo "pytest $(2)"
	@$(PLAIN) rc=0; $(or $(3),$(BIN)/python) -m pytest $(PYTEST_OPTS) -n $(PYTEST_JOBS) --junitxml=$(REPORTS)/$(1).xml $(2) || rc=$$?; \
		echo $$rc >$(REPORTS)/$(1).rc; exit $$rc
endef

units:
	$(call run_pytest,units,tests/unit tests/test_build.py tests/test_release.py tests/test_ci_tooling.py tests/test_docs.py tests/test_benchmarks.py)

# The stages that need a Kubernetes API run through scripts/cluster_stage.sh: each pytest worker starts a real control
# plane of its own from Kubernetes release binaries (tests/support/k8s_binaries.py), with a kubelet stand-in per test for the nodes it needs;
# without one, the cluster of KUBECONFIG; without either, it says so and does not fail (nothing to test against).
# $(1): stage, $(2): pytest arguments, $(3): the Python to run pytest with (default .venv's), $(4): workers (default
# PYTEST_JOBS).
define cluster_pytest
	@$(PLAIN) bash $(ROOT)/scripts/cluster_stage.sh $(1) $(REPORTS) $(or $(3),$(BIN)/python) $(PYTEST_OPTS) -rs \
		-n $(or $(4),$(PYTEST_JOBS)) --junitxml=$(REPORTS)/$(1).xml $(2)
endef

# The site run through the plugin's inventory is left to the ansible-core stages (2.17, 2.18): on 2.19 the make
# demo test runs site.yml through the same plugin and the same demo cluster.
INTEGRATION_DESELECT := tests/integration/test_inventory.py::test_site_with_only_the_plugin_reaches_the_hand_written_inventorys_nodes
integration:
	$(call cluster_pytest,integration,--deselect $(INTEGRATION_DESELECT) tests/integration tests/support/tests,,$(INTEGRATION_JOBS))

# The declared floors, not the pinned tools: meta/ee-requirements.txt's minimum kubernetes, urllib3 and
# jsonpatch installed exactly (==) in their own venv, with the other test tools from requirements-dev.txt.
# The unit tests of plugins/ (the code that imports those libraries), not those of the roles, which
# never import them and spend minutes in ansible-playbook runs.
min-versions:
	@$(PLAIN) $(BIN)/python $(ROOT)/scripts/min_versions.py --venv $(MIN_VENV)
	$(call cluster_pytest,min-versions,$(MIN_SUITES),$(MIN_VENV)/bin/python)

core-2.18:
	@$(PLAIN) $(BIN)/python $(ROOT)/scripts/min_versions.py --stage core-2.18 --venv $(CORE_218_VENV) \
		--ansible-core $(CORE_218) --libraries pinned
	$(call cluster_pytest,core-2.18,$(CORE_SUITES),$(CORE_218_VENV)/bin/python,$(CORE_218_JOBS))

# ansible-lint, then antsibull-docs on the documentation users read (plugins' and roles' markup, links between them);
# both run, and either failing fails the stage.
lint:
	@$(PLAIN) rc=0; echo "ansible-lint --profile production"; $(BIN)/ansible-lint --profile production || rc=1; \
		echo "antsibull-docs lint-collection-docs --plugin-docs"; \
		$(BIN)/antsibull-docs lint-collection-docs --plugin-docs $(ROOT) || rc=1; exit $$rc

# One real node for the whole run (the tests share its kubelet and restart it), so one pytest process. The first
# test's time includes the node's set-up (packages from the mirror while other stages run): --timeout 900.
node:
	@$(PLAIN) bash $(ROOT)/scripts/cluster_stage.sh node $(REPORTS) $(BIN)/python -p no:cacheprovider --durations=10 -rs \
		--timeout 900 --junitxml=$(REPORTS)/node.xml tests/real_node

roles:
	@mkdir -p $(REPORTS)
	@$(PLAIN) $(BIN)/python $(ROOT)/scripts/run_molecule.py --results $(REPORTS)/roles.json --jobs $(ROLES_JOBS) \
		--logs $(REPORTS)/roles $(SCENARIOS)

test:
	@$(or $(PYTHON),python3.11) $(ROOT)/scripts/run_tests.py --reports $(REPORTS)

# One test (file, node id or -k ARGS), in one process, through the cluster stages' script: an integration test gets a
# real control plane of its own, any other test runs as under make units.
TEST ?=
ARGS ?=
test-one:
	@test -n "$(TEST)" || { echo "make test-one TEST=tests/integration/test_dra.py::test_name [ARGS='-k ...']"; exit 2; }
	@$(PLAIN) bash $(ROOT)/scripts/cluster_stage.sh test-one $(REPORTS) $(BIN)/python -p no:cacheprovider -n 0 -rs \
		$(ARGS) $(TEST)

demo: setup
	@$(PLAIN) bash $(ROOT)/scripts/demo.sh

clean:
	rm -rf $(ROOT)/.cache/sanity $(REPORTS) $(ROOT)/tests/output
	@echo "make clean leaves what later runs reuse; to remove it too:"
	@if [ -s $(ROOT)/.cache/debian-packages-installed-by-setup.txt ]; then \
		echo "  apt-get purge $$(sort -u $(ROOT)/.cache/debian-packages-installed-by-setup.txt | tr '\n' ' ')  # installed system-wide by make setup"; \
	else \
		echo "  (make setup installed no Debian package on this machine: they were present, or it was not root)"; \
	fi
	@echo "  rm -rf .venv .cache    # pinned tools; test collections, downloads, molecule root file systems, min-versions venv"
	@echo "  rm -rf ~/.ansible      # ansible-test's offline pip bootstrap (test/cache), molecule's scenario state (tmp/molecule.*),"
	@echo "                         # empty collections/ and roles/ folders; keep it if it held anything of yours"
	@echo "  rm -rf ~/.cache/pip    # pip's download cache (if pip's cache is on), shared with your other projects"
