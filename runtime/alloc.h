/* Allocators: the single hook through which libmlcrt gets memory.
 *
 * Every runtime function that allocates takes an mlc_allocator from its
 * caller; nothing in the library keeps one in a global.  That lets an
 * application route weights into its own pools, and lets tests make the Nth
 * allocation fail to check that every error path cleans up (the technique of
 * Lua's ltests.c).  An allocator is three words and is passed by value.
 *
 * The two exceptions, both documented where they occur: error statuses come
 * from the C heap (status.h), and cJSON, which parses and prints safetensors
 * headers, allocates its temporary trees with malloc because its hooks are
 * process-global.
 */
#ifndef MLC_ALLOC_H
#define MLC_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlc_allocator {
  /* Returns NULL on failure.  Never called with n == 0. */
  void *(*alloc)(void *ctx, size_t n);
  /* Never called with p == NULL. */
  void (*free)(void *ctx, void *p);
  void *ctx;
} mlc_allocator;

/* malloc and free. */
mlc_allocator mlc_allocator_default(void);

/* n == 0 is treated as 1, so NULL always means "out of memory". */
void *mlc_allocator_alloc(mlc_allocator a, size_t n);
/* count * size bytes, or NULL when that overflows size_t. */
void *mlc_allocator_alloc_array(mlc_allocator a, size_t count, size_t size);
/* Accepts NULL. */
void mlc_allocator_free(mlc_allocator a, void *p);

/* A test allocator that forwards to `base` but refuses exactly one request:
 * the fail_at-th (counting from 1; 0 never fails).  Later requests succeed
 * again, so code that goes on allocating after a failure is exercised too.
 * It also counts live blocks, which lets a test check for leaks without a
 * sanitizer.  Typical use:
 *
 *   for (size_t n = 1;; n++) {
 *     mlc_failing_allocator fa;
 *     mlc_allocator a = mlc_allocator_failing(&fa, mlc_allocator_default(), n);
 *     mlc_status st = operation(a);
 *     ... check st is OK or OUT_OF_MEMORY, clean up, check fa.live == 0 ...
 *     if (!fa.failed) break;  // the operation made fewer than n requests
 *   }
 */
typedef struct mlc_failing_allocator {
  mlc_allocator base;
  size_t fail_at;
  size_t calls;  /* requests seen, the refused one included */
  size_t live;   /* blocks handed out and not yet freed */
  size_t failed; /* requests refused: 0 or 1 */
} mlc_failing_allocator;

/* Initialises *state and returns an allocator that uses it; *state must
 * outlive every block allocated through the result. */
mlc_allocator mlc_allocator_failing(mlc_failing_allocator *state,
                                    mlc_allocator base, size_t fail_at);

#ifdef __cplusplus
}
#endif

#endif /* MLC_ALLOC_H */
