/* Arena allocation for compiler data.
 *
 * Everything the compiler builds for one compilation (tokens, AST, IR nodes,
 * interned strings) comes from one arena and is freed in one go when the
 * compilation ends.  There is no per-object free: that is the point.  An
 * arena that cannot get memory from the system is an internal error, since
 * the compiler cannot continue without it.
 */
#ifndef MLC_ARENA_H
#define MLC_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct mlc_arena_block mlc_arena_block;
typedef struct {
  mlc_arena_block *head; /* newest block first */
  size_t total;          /* bytes handed out, for --stats */
} mlc_arena;

void mlc_arena_init(mlc_arena *a);
void mlc_arena_free(mlc_arena *a);
/* Zeroed, 16-byte aligned memory that lives as long as the arena. */
void *mlc_arena_alloc(mlc_arena *a, size_t n);
/* Grow an array that lives in the arena: returns a new copy of `old` (which
 * held old_n bytes) with room for new_n bytes.  The old copy stays until the
 * arena goes. */
void *mlc_arena_grow(mlc_arena *a, void *old, size_t old_n, size_t new_n);
char *mlc_arena_strndup(mlc_arena *a, const char *s, size_t n);
char *mlc_arena_strdup(mlc_arena *a, const char *s);
char *mlc_arena_printf(mlc_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A growable array of 32-bit values in an arena: used for node lists. */
typedef struct {
  uint32_t *v;
  uint32_t n, cap;
} mlc_u32vec;
void mlc_u32vec_push(mlc_arena *a, mlc_u32vec *vec, uint32_t x);

/* Internal errors: a broken invariant inside mlc itself, never a user error.
 * The driver installs a hook that prints and exits with the internal-error
 * code; the default aborts. */
void mlc_internal_error(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define MLC_ICE(...) mlc_internal_error(__FILE__, __LINE__, __VA_ARGS__)
#define MLC_ASSERT(c) \
  do { if (!(c)) MLC_ICE("assertion failed: %s", #c); } while (0)

#endif
