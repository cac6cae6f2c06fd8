/* xxHash, compiled into libmlcrt, so that neither the library nor an
 * artifact needs libxxhash at link time.  The runtime's sources are built
 * with XXH_NAMESPACE=mlc_ (runtime/CMakeLists.txt), which renames every
 * xxHash symbol, here and at each call, to mlc_XXH...: an application with
 * its own xxHash links without a clash.  One translation unit rather than
 * XXH_INLINE_ALL everywhere: GCC 12 at -O3 reports a false array-bounds
 * error once XXH64_update is inlined into a caller hashing a short literal. */
#define XXH_STATIC_LINKING_ONLY
#define XXH_IMPLEMENTATION
#include <xxhash.h>
