/* Status values: how every libmlcrt call reports success or failure.
 *
 * Modelled on IREE's iree_status_t.  A status is a pointer: NULL means OK,
 * so the success path costs one compare and no allocation.  An error is a
 * heap object carrying a code and a message; whoever receives one owns it
 * and must pass it on, or free it with mlc_status_free().  The library never
 * calls exit() or abort() for anything a user can cause: it returns a status.
 *
 * Statuses come from the C heap, not from an mlc_allocator, because they are
 * made on error paths deep inside code that may have no allocator at hand,
 * and because "the allocator failed" must itself be reportable.  When the
 * heap is exhausted too, mlc_status_make() returns a preallocated read-only
 * OUT_OF_MEMORY status, so an error is never reported as NULL (OK).
 */
#ifndef MLC_STATUS_H
#define MLC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MLC_STATUS_PRINTF(fmt_arg, first_arg) \
  __attribute__((format(printf, fmt_arg, first_arg)))
/* A dropped status is a leak and a lost error, so make the compiler say so. */
#define MLC_MUST_USE __attribute__((warn_unused_result))
#else
#define MLC_STATUS_PRINTF(fmt_arg, first_arg)
#define MLC_MUST_USE
#endif

typedef enum mlc_status_code_t {
  MLC_OK = 0,
  MLC_INVALID_ARGUMENT, /* the caller passed something wrong */
  MLC_NOT_FOUND,        /* a file, tensor or key that does not exist */
  MLC_OUT_OF_MEMORY,
  MLC_DATA_LOSS,        /* a file is corrupt or malformed */
  MLC_IO,               /* the OS refused a read, write, fsync or rename */
  MLC_UNIMPLEMENTED,    /* valid input that this build does not support */
  MLC_INTERNAL,         /* a broken invariant inside libmlcrt */
  MLC_STATUS_CODE_COUNT
} mlc_status_code_t;

typedef struct mlc_status_t *mlc_status;

/* Makes an error status with a printf-style message.  MLC_OK gives NULL. */
MLC_MUST_USE mlc_status mlc_status_make(mlc_status_code_t code,
                                        const char *fmt, ...)
    MLC_STATUS_PRINTF(2, 3);

/* Prefixes context to the message ("loading w.safetensors: <old message>")
 * and returns the status to use from then on; `st` is consumed.  NULL stays
 * NULL, and if the longer message cannot be allocated the original status is
 * returned unchanged rather than losing the error. */
MLC_MUST_USE mlc_status mlc_status_annotate(mlc_status st, const char *fmt, ...)
    MLC_STATUS_PRINTF(2, 3);

/* MLC_OK for NULL. */
mlc_status_code_t mlc_status_code(mlc_status st);
/* "OK" for NULL.  Valid until the status is freed. */
const char *mlc_status_message(mlc_status st);
/* "INVALID_ARGUMENT", ...; "UNKNOWN" for a value outside the enum. */
const char *mlc_status_code_name(mlc_status_code_t code);
/* Accepts NULL and the preallocated out-of-memory status. */
void mlc_status_free(mlc_status st);

/* Returns the status of `expr` from the enclosing function if it failed. */
#define MLC_RETURN_IF_ERROR(expr)           \
  do {                                      \
    mlc_status mlc_return_if_error_ = (expr); \
    if (mlc_return_if_error_)               \
      return mlc_return_if_error_;          \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* MLC_STATUS_H */
