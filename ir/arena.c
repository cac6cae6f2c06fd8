/* Arena allocator: a list of large blocks carved up by bumping a pointer.
 * Large requests get a block of their own so that a 100 MB string does not
 * waste the rest of a normal block. */
#include "ir/arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SIZE (64 * 1024)

struct mlc_arena_block {
  mlc_arena_block *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

void mlc_arena_init(mlc_arena *a) { a->head = NULL; a->total = 0; }

void mlc_arena_free(mlc_arena *a) {
  for (mlc_arena_block *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
  a->total = 0;
}

void *mlc_arena_alloc(mlc_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  mlc_arena_block *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t size = n > BLOCK_SIZE / 4 ? n : BLOCK_SIZE;
    b = malloc(sizeof *b + size);
    if (!b) MLC_ICE("out of memory allocating %zu bytes", n);
    b->used = 0;
    b->size = size;
    if (size == n && a->head) { /* keep the current block for small requests */
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

void *mlc_arena_grow(mlc_arena *a, void *old, size_t old_n, size_t new_n) {
  void *p = mlc_arena_alloc(a, new_n);
  if (old_n) memcpy(p, old, old_n < new_n ? old_n : new_n);
  return p;
}

char *mlc_arena_strndup(mlc_arena *a, const char *s, size_t n) {
  char *p = mlc_arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *mlc_arena_strdup(mlc_arena *a, const char *s) {
  return mlc_arena_strndup(a, s, strlen(s));
}

char *mlc_arena_printf(mlc_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) MLC_ICE("bad format string '%s'", fmt);
  char *p = mlc_arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

void mlc_u32vec_push(mlc_arena *a, mlc_u32vec *vec, uint32_t x) {
  if (vec->n == vec->cap) {
    uint32_t cap = vec->cap ? vec->cap * 2 : 8;
    vec->v = mlc_arena_grow(a, vec->v, vec->n * sizeof(uint32_t), cap * sizeof(uint32_t));
    vec->cap = cap;
  }
  vec->v[vec->n++] = x;
}
