# gpserve build. Layers: server -> api -> {core, store}; each layer is one
# static library in $(BUILD); `make` writes build/gpserve once server/ has main().
#   make            build libraries, tests and benchmarks
#   make run        install what the daemon needs, build only the daemon, start it
#   make test       run every test (SAN=1: under ASan + UBSan, in build/san)
#   make bench      run the benchmarks and print their tables
#   make deps       check / install the Debian packages of the daemon (build and run)
#   make test-deps  ... and the test tools (cmocka, Chromium, Node, PostgreSQL, clang)
#   make fuzz       libFuzzer targets (clang) in build/fuzz, each run FUZZ_SECONDS
#   make docs       regenerate the documentation blocks written from the code
#   make check-layers  the include rules and no circle inside a layer (run by make test)
#   build/gpserve-fit  the MPI fit program (mpi/), built with mpicc when it exists

CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   := build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT     := -O1 -g
else
BUILD   := build
SANFLAGS :=
OPT     := -O2 -g
endif
# GP_CLONES=avx2: the target_clones of core/linalg/linalg.c without their
# AVX-512 clone, in a build folder of its own (build/avx2): an AVX-512 machine
# then runs the code of an AVX2 one (bench/README.md "AVX2 on an AVX-512 machine").
GP_CLONES ?=
ifeq ($(GP_CLONES),avx2)
BUILD   := $(BUILD)/avx2
OPT     += -DGP_CLONES_AVX2
endif

# libpq, the PostgreSQL back end of the store (store/db_pg.c); only store/
# (and the store's tests) include its header (mk/check_layers.sh).
PQ_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
PQ_LIBS   := $(shell pkg-config --libs libpq 2>/dev/null || echo -lpq)
CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -Wshadow \
           -Wstrict-prototypes -Wmissing-prototypes \
           $(OPT) $(SANFLAGS) -I. $(PQ_CFLAGS) -MMD -MP
LDFLAGS := $(SANFLAGS)
# OpenBLAS provides CBLAS (and LAPACK through Debian's alternatives); LAPACKE is its own library.
BLAS_LIBS := -llapacke -lopenblas -lm
CORE_LIBS := $(BLAS_LIBS) -lpthread
SERVICE_LIBS := -lmicrohttpd -lgnutls -ljansson -lsqlite3 $(PQ_LIBS) -lnettle
TEST_LIBS := -lcmocka

# OpenBLAS worker threads spin for 2^28 cycles (~0.1 s) after every call and
# take the cores from our own threaded pair loops (kernel Gram matrices and the
# LML gradient contraction); 2^16 cycles keeps BLAS responsive without that.
# OpenBLAS reads it when it loads, so it is set for the programs make runs.
OPENBLAS_THREAD_TIMEOUT ?= 16
export OPENBLAS_THREAD_TIMEOUT

LAYERS  := core store api server
# core/ has a folder per area (core/base, core/linalg, ..., core/methods); the
# other layers are flat.
$(foreach L,$(LAYERS),$(eval $(L)_SRC := $(filter-out server/main.c,$(shell find $(L) -name '*.c' | sort))))
$(foreach L,$(LAYERS),$(eval $(L)_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$($(L)_SRC))))
# Generated sources live in $(BUILD)/gen and are never committed: the OpenAPI
# document embedded in the daemon (api/gen_openapi.sh from api/openapi.yaml).
OPENAPI_DOC_C := $(BUILD)/gen/api/openapi_doc.c
api_OBJ += $(BUILD)/obj/gen/api/openapi_doc.o
# And every file of the browser view (mk/gen_assets.sh from web/); the folders
# are prerequisites too, so that a file added or removed remakes the table.
UI_ASSETS_C := $(BUILD)/gen/api/ui_assets.c
UI_FILES    := $(shell find web -type f ! -name '.*' 2>/dev/null) $(shell find web -type d 2>/dev/null)
api_OBJ += $(BUILD)/obj/gen/api/ui_assets.o
LIB_core   := $(BUILD)/libgpcore.a
LIB_store  := $(BUILD)/libgpstore.a
LIB_api    := $(BUILD)/libgpapi.a
LIB_server := $(BUILD)/libgpserver.a

# The MPI layer (mpi/, on top of api/): gpserve-fit, the program each rank of
# a sharded fit runs (docs/design/scale-out.md). Only it includes <mpi.h>;
# its objects, the MPI test programs (tests/mpi/) and benchmarks (bench/mpi/)
# are compiled and linked with mpicc (Open MPI's wrapper: libopenmpi-dev).
# Without mpicc they are skipped with a message.
MPICC      ?= mpicc
HAVE_MPI   := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
mpi_SRC    := $(filter-out mpi/main.c,$(sort $(wildcard mpi/*.c)))
mpi_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(mpi_SRC))
MPI_TEST_BIN  := $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi/%,$(wildcard tests/mpi/*.c))
MPI_BENCH_BIN := $(patsubst bench/mpi/%.c,$(BUILD)/bench/mpi/%,$(wildcard bench/mpi/*.c))
GPSERVE_FIT := $(if $(wildcard mpi/main.c),$(BUILD)/gpserve-fit,)
MPI_PROGRAMS := $(if $(HAVE_MPI),$(GPSERVE_FIT) $(MPI_TEST_BIN) $(MPI_BENCH_BIN))
# What gpserve-fit links besides the layers: the store's and the api's libraries.
FIT_LIBS   := -ljansson -lsqlite3 $(PQ_LIBS) -lnettle

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Support code shared by tests and benchmarks (dataset loader, fixture reader).
TESTLIB_SRC := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c)) $(wildcard bench/support/*.c)
TESTLIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TESTLIB_SRC))
# Helper programs of the integration tests (tests/integration/*.c, e.g. the
# slow client of the abuse area), one file each, no libraries.
IT_HELPER_SRC := $(wildcard tests/integration/*.c)
IT_HELPER_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(IT_HELPER_SRC))
BENCH_SRC  := $(wildcard bench/bench_*.c)
# A benchmark program of several files is a folder bench/bench_NAME/ (*.c, one
# main) and builds to $(BUILD)/bench/bench_NAME, like a one-file bench/bench_NAME.c.
BENCH_DIRS := $(patsubst %/,%,$(wildcard bench/bench_*/))
BENCH_BIN  := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC)) \
              $(patsubst bench/%,$(BUILD)/bench/%,$(BENCH_DIRS)) $(BUILD)/bench/gpbench
# The experiment driver (bench/README.md): bench/driver/*.c, one program.
DRIVER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard bench/driver/*.c))
GEN_DOCS   := $(BUILD)/mk/gen_docs
# Files with blocks generated from the code (mk/gen_docs.c).
GEN_DOC_FILES := README.md api/openapi.yaml docs/design/api.md
GPSERVE    := $(if $(wildcard server/main.c),$(BUILD)/gpserve,)
# Every layer library that has sources, highest layer first (link order).
ALL_LIBS   := $(if $(server_SRC),$(LIB_server)) $(if $(api_SRC),$(LIB_api)) \
              $(if $(store_SRC),$(LIB_store)) $(LIB_core)

.PHONY: all deps test-deps build-deps bench-deps test unit-test bench clean run daemon
# Keep objects of test and bench programs (make would delete them as intermediates).
.SECONDARY:
# The packages come first, in a make of their own: with -j2 a compile must not
# start before deps has installed the headers it includes (and the flags read
# with pkg-config above are read again once the packages are there).
all:
	@$(MAKE) --no-print-directory build-deps
	@$(MAKE) --no-print-directory build-all

# Only the daemon: the four layer libraries and main.c.
daemon: $(GPSERVE)

.PHONY: build-all
build-all: $(GEN_DOCS) $(LIB_core) $(if $(store_SRC),$(LIB_store)) $(if $(api_SRC),$(LIB_api)) \
           $(if $(server_SRC),$(LIB_server)) $(GPSERVE) $(UNIT_BIN) $(BENCH_BIN) \
           $(IT_HELPER_BIN) mpi-programs

# gpserve-fit and the MPI tests and benchmarks, or why not.
.PHONY: mpi-programs
mpi-programs: $(MPI_PROGRAMS)
ifneq ($(HAVE_MPI),1)
	@echo "mpi: $(MPICC) not found: gpserve-fit and the MPI tests are not built (make deps installs libopenmpi-dev)"
endif

# The tiers of mk/deps.sh: the daemon's build and run-time packages (deps);
# what the tests and benchmarks compile against (build-deps: cmocka); and the
# tools of make test (test-deps: curl, jq, the sqlite3 shell, Chromium, Node
# packages, PostgreSQL, haproxy, clang and libFuzzer).
deps:
	@sh mk/deps.sh

build-deps: deps
	@sh mk/deps.sh test

test-deps: build-deps
	@sh mk/deps.sh node
	@sh mk/deps.sh fuzz || echo "deps: without clang and libclang-rt-14-dev make test skips the fuzz targets"

# The peers and tools of make bench (scikit-learn, statsmodels, Flask, gunicorn, wrk);
# see mk/deps.sh.
bench-deps:
	@sh mk/deps.sh bench

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The MPI layer and its programs: mpicc (the more specific patterns win).
$(BUILD)/obj/mpi/%.o: mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/tests/mpi/%.o: tests/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/bench/mpi/%.o: bench/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/gpserve-fit: $(BUILD)/obj/mpi/main.o $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core)
	$(MPICC) $(LDFLAGS) -o $@ $< $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core) $(FIT_LIBS) $(CORE_LIBS)

$(BUILD)/tests/mpi/%: $(BUILD)/obj/tests/mpi/%.o $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core)
	@mkdir -p $(dir $@)
	$(MPICC) $(LDFLAGS) -o $@ $< $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core) $(FIT_LIBS) $(CORE_LIBS)

$(BUILD)/bench/mpi/%: $(BUILD)/obj/bench/mpi/%.o $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core)
	@mkdir -p $(dir $@)
	$(MPICC) $(LDFLAGS) -o $@ $< $(mpi_OBJ) $(LIB_api) $(LIB_store) $(LIB_core) $(FIT_LIBS) $(CORE_LIBS)

$(OPENAPI_DOC_C): api/openapi.yaml api/gen_openapi.sh
	@mkdir -p $(dir $@)
	sh api/gen_openapi.sh api/openapi.yaml $@

$(UI_ASSETS_C): $(UI_FILES) mk/gen_assets.sh
	@mkdir -p $(dir $@)
	sh mk/gen_assets.sh web $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB_core): $(core_OBJ)
$(LIB_store): $(store_OBJ)
$(LIB_api): $(api_OBJ)
$(LIB_server): $(server_OBJ)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TESTLIB_OBJ) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TESTLIB_OBJ) $(TEST_EXTRA_OBJ) $(ALL_LIBS) $(TEST_LIBS) $(SERVICE_LIBS) $(CORE_LIBS)

# The driver's experiment expansion, preprocessing and scores, tested on their own (bench/driver/).
BENCH_DRIVER_TESTED := $(addprefix $(BUILD)/obj/bench/driver/,experiment.o prepare.o score.o run.o peers.o)
$(BUILD)/tests/test_bench_experiment: TEST_EXTRA_OBJ := $(BENCH_DRIVER_TESTED)
$(BUILD)/tests/test_bench_experiment: $(BENCH_DRIVER_TESTED)

$(BUILD)/tests/integration/%: $(BUILD)/obj/tests/integration/%.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $<

$(BUILD)/gpserve: $(BUILD)/obj/server/main.o $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(SERVICE_LIBS) $(CORE_LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(TESTLIB_OBJ) $(LIB_core)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TESTLIB_OBJ) $(LIB_core) $(CORE_LIBS)

$(BUILD)/bench/gpbench: $(DRIVER_OBJ) $(TESTLIB_OBJ) $(LIB_core)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(DRIVER_OBJ) $(TESTLIB_OBJ) $(LIB_core) -ljansson $(CORE_LIBS)

# One link rule per folder program (BENCH_DIRS): its objects, then what every
# benchmark links.
define BENCH_DIR_RULE
$(BUILD)/bench/$(notdir $(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(1)/*.c)) $(TESTLIB_OBJ) $(LIB_core)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(1)/*.c)) $$(TESTLIB_OBJ) $$(LIB_core) $$(CORE_LIBS)
endef
$(foreach d,$(BENCH_DIRS),$(eval $(call BENCH_DIR_RULE,$(d))))

# The fuzz targets run in make test too, FUZZ_TEST_SECONDS each (not under
# SAN=1: they are built with the sanitizers already); where clang or
# libFuzzer's runtime is missing, tests/run.sh prints why and skips them.
FUZZ_TEST_SECONDS ?= 12
ifeq ($(SAN),1)
FUZZ_TEST_SECONDS := 0
endif
test:
	@$(MAKE) --no-print-directory test-deps
	@$(MAKE) --no-print-directory build-all check-layers fuzz-test-build
	@$(GEN_DOCS) --check $(GEN_DOC_FILES)
	@FUZZ_TEST_SECONDS=$(FUZZ_TEST_SECONDS) FUZZ_DIR=$(FUZZ_DIR) FUZZ_CC=$(FUZZ_CC) \
	    sh tests/run.sh $(BUILD)

bench:
	@$(MAKE) --no-print-directory build-deps bench-deps
	@$(MAKE) --no-print-directory build-all
	@sh bench/run.sh $(BUILD)

# The method reference of the README, the method schemas and error enum of the
# OpenAPI document and the error table of docs/design/api.md, generated from
# the method registry and the error catalogue (mk/gen_docs.c); make test fails
# while they are stale.
# The include rules of ARCHITECTURE.md (mk/check_layers.sh), and no import
# circle inside a layer (mk/check_cycles.sh: at link level, from the layer
# objects, so the libraries are built first), each with proof that its rules
# fail on a violation. CYCLE_LAYERS narrows the circle check (e.g. "api store").
CYCLE_LAYERS ?= $(LAYERS)
.PHONY: check-layers
check-layers: $(LIB_core) $(if $(store_SRC),$(LIB_store)) $(if $(api_SRC),$(LIB_api)) \
              $(if $(server_SRC),$(LIB_server)) $(if $(HAVE_MPI),$(mpi_OBJ))
	@sh mk/check_layers.sh
	@sh mk/check_layers.sh --self-test
	@sh mk/check_cycles.sh $(BUILD) $(CYCLE_LAYERS) $(if $(and $(HAVE_MPI),$(mpi_OBJ)),mpi)
	@sh mk/check_cycles.sh --self-test

.PHONY: docs
docs: $(GEN_DOCS)
	$(GEN_DOCS) --write $(GEN_DOC_FILES)

$(GEN_DOCS): $(BUILD)/obj/mk/gen_docs.o $(LIB_core)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB_core) -ljansson $(CORE_LIBS)

run:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory daemon
	@if [ -z "$(GPSERVE)" ]; then echo "run: the daemon (server/) is not built yet"; exit 1; fi
	$(GPSERVE) --bind 127.0.0.1 --port 8080 --db ./gpserve.db

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- fuzz -------------------------------------------------------------------
# libFuzzer targets (tests/fuzz/fuzz_*.c, one file per target) built with clang
# and ASan + UBSan into build/fuzz: a separate object build of the core, store
# and api sources (plus the server's route matcher and string helpers) with the
# fuzzer flags, linked into every target; build/obj is never used. `make fuzz`
# builds them and runs each for FUZZ_SECONDS on a copy of its seed corpus
# (tests/fuzz/corpus/<target>, copied into build/fuzz/corpus/<target>, which
# keeps what earlier runs found); it fails when a target finds a crash, a leak
# or a timeout (artifacts in build/fuzz/artifacts/<target>/). `make test` builds
# them too (fuzz-test-build, skipped with a message without clang or libFuzzer)
# and runs each for FUZZ_TEST_SECONDS (tests/run.sh), a finding a failure.
#   make fuzz FUZZ_SECONDS=60 FUZZ_TARGETS="fuzz_fit_json fuzz_kernel"
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -g -O1 $(FUZZ_SAN) \
                -fsanitize=fuzzer-no-link -I. $(PQ_CFLAGS) -MMD -MP
FUZZ_LDFLAGS := $(FUZZ_SAN) -fsanitize=fuzzer
FUZZ_LIB_SRC := $(core_SRC) $(store_SRC) $(api_SRC) \
                $(wildcard server/route.c server/util.c server/keys.c server/config.c)
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRC)) \
                $(FUZZ_DIR)/obj/gen/api/openapi_doc.o $(FUZZ_DIR)/obj/gen/api/ui_assets.o
FUZZ_TARGETS ?= $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-build fuzz-deps
fuzz: fuzz-deps fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_BIN)

# make test's build of the targets: nothing (tests/run.sh says why) where
# clang cannot link a libFuzzer target, or when FUZZ_TEST_SECONDS is 0.
.PHONY: fuzz-test-build
fuzz-test-build:
	@if [ "$(FUZZ_TEST_SECONDS)" != 0 ] && sh tests/fuzz/have_libfuzzer.sh $(FUZZ_CC) 2>/dev/null; then \
	    $(MAKE) --no-print-directory fuzz-build; fi

# The daemon's packages (make deps) plus what libFuzzer needs (mk/deps.sh fuzz).
fuzz-deps:
	@sh mk/deps.sh
	@sh mk/deps.sh fuzz

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/obj/gen/api/%.o: $(FUZZ_DIR)/gen/api/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/gen/api/ui_assets.c: $(UI_FILES) mk/gen_assets.sh
	@mkdir -p $(dir $@)
	sh mk/gen_assets.sh web $@

$(FUZZ_DIR)/gen/api/openapi_doc.c: api/openapi.yaml api/gen_openapi.sh
	@mkdir -p $(dir $@)
	sh api/gen_openapi.sh api/openapi.yaml $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $^ $(SERVICE_LIBS) $(CORE_LIBS)

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
