# Allocation profiling tests (included by the top Makefile after the unit
# test rules). GOT patching and ASan do not mix well: ASan interposes
# malloc itself and its dlclose/unmap handling is what test_alloc_unload
# exercises, so these tests and their shared objects are built without
# sanitizers, as the module is (explicit rules: they win over the unit
# tests' pattern rule).
#   build/unit/liballoc_victim.so    named allocating functions, full RELRO
#   build/unit/libspanprof_alloc.so  the hooks as a loadable object
#   build/unit/test_alloc_hooks      hooks linked in: bytes, leaks, threads,
#                                    every allocation function, fork
#   build/unit/test_alloc_hooks_maps /proc/self/maps read once a pass
#   build/unit/test_alloc_unload     dlopen/install/uninstall/dlclose of the
#                                    hook object while threads allocate

ALLOC_CFLAGS  := $(CORE_CFLAGS) -O2 -g -fno-omit-frame-pointer
ALLOC_SRCS    := common/profile/alloc_hooks.c common/profile/alloc_sampler.c \
                 common/profile/alloc_table.c common/profile/alloc_stacks.c \
                 common/profile/slot_ring.c common/profile/thread_ctx.c \
                 common/base/clock.c common/base/file_read.c
ALLOC_HDRS    := $(wildcard common/profile/alloc_*.h) \
                 common/profile/slot_ring.h common/profile/thread_ctx.h \
                 common/base/clock.h common/base/file_read.h
ALLOC_VICTIM  := $(BUILD)/unit/liballoc_victim.so
# The hook object of test_alloc_unload also carries the loader snapshot (as
# the modules do), which redirects libunwind's dl_iterate_phdr to itself.
ALLOC_SO_SRCS := $(ALLOC_SRCS) common/profile/loader_snapshot.c
ALLOC_HOOK_SO := $(BUILD)/unit/libspanprof_alloc.so

$(ALLOC_VICTIM): t/unit/alloc_victim.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -O1 -g -fPIC -fno-omit-frame-pointer \
	    -shared -Wl,-z,relro -Wl,-z,now -o $@ $<

$(ALLOC_HOOK_SO): $(ALLOC_SO_SRCS) $(ALLOC_HDRS) common/profile/loader_snapshot.h
	@mkdir -p $(dir $@)
	$(CC) $(ALLOC_CFLAGS) -shared -Wl,-z,relro -Wl,-z,now -o $@ \
	    $(ALLOC_SO_SRCS) -lunwind -lpthread

$(BUILD)/unit/test_alloc_hooks: t/unit/test_alloc_hooks.c t/unit/tap.h $(ALLOC_SRCS) $(ALLOC_HDRS) $(ALLOC_VICTIM)
	$(CC) $(ALLOC_CFLAGS) -It/unit -rdynamic -o $@ $< $(ALLOC_SRCS) -lunwind -lpthread

$(BUILD)/unit/test_alloc_unload: t/unit/test_alloc_unload.c t/unit/tap.h $(ALLOC_HDRS) $(ALLOC_VICTIM) $(ALLOC_HOOK_SO)
	$(CC) $(ALLOC_CFLAGS) -It/unit -o $@ $< -lpthread

# Full RELRO like the servers: every GOT slot on a read-only page.
$(BUILD)/unit/test_alloc_hooks_maps: t/unit/test_alloc_hooks_maps.c t/unit/tap.h $(ALLOC_SRCS) $(ALLOC_HDRS) $(ALLOC_VICTIM)
	$(CC) $(ALLOC_CFLAGS) -It/unit -Wl,-z,relro -Wl,-z,now -o $@ $< $(ALLOC_SRCS) -lunwind -lpthread -ldl
