/* Nsight Compute's view of mlc's kernels, for `mlc profile --ncu`: its CSV
 * (`ncu --csv --page raw`, or the long `--page details` form) parsed into
 * one row per kernel launch, the seed's classification rule applied to its
 * throughputs, and the comparison with mlc's own static verdicts.
 *
 * The raw page is one header row of column names ("ID", "Process ID",
 * "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
 * "Block Size", "Grid Size", "Device", "CC", then one column per metric
 * asked for), an optional row of units (its ID empty), then one row per
 * profiled launch.  Every field is quoted; numbers may carry thousands
 * separators ("1,234.5").  Lines before the header that ncu prints itself
 * ("==PROF== ...", "==WARNING== ...") are skipped.  The details page has
 * one row per (launch, metric): "ID", "Kernel Name", ..., "Metric Name",
 * "Metric Unit", "Metric Value".  Both are read by column name. */
#ifndef MLC_NCU_H
#define MLC_NCU_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/profile.h"
#include "runtime/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_NCU_SM "sm__throughput.avg.pct_of_peak_sustained_elapsed"
#define MLC_NCU_MEM "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
#define MLC_NCU_DRAM "dram__throughput.avg.pct_of_peak_sustained_elapsed"
#define MLC_NCU_TIME "gpu__time_duration.sum"
#define MLC_NCU_CLOCK "sm__cycles_elapsed.avg.per_second" /* the SM clock during the kernel (optional) */
#define MLC_NCU_BYTES "dram__bytes.sum" /* the bytes that moved to and from DRAM during the kernel (optional) */
/* The --metrics list `mlc profile --ncu` asks for. */
#define MLC_NCU_METRICS MLC_NCU_SM "," MLC_NCU_MEM "," MLC_NCU_DRAM "," MLC_NCU_TIME "," MLC_NCU_CLOCK "," MLC_NCU_BYTES

/* ncu's verdict is the seed's rule (mlc_bound_rule, runtime/profile.h) on
 * its SM throughput and its HBM (DRAM) throughput, % of peak; where the
 * DRAM metric is absent, the memory throughput (the busiest of L1, L2 and
 * DRAM) stands in for it. */

typedef struct {
  char kernel[160];   /* "Kernel Name", its parameter list cut off */
  double sm_pct;      /* MLC_NCU_SM; -1 if absent */
  double mem_pct;     /* MLC_NCU_MEM; -1 if absent */
  double dram_pct;    /* MLC_NCU_DRAM; -1 if absent */
  double seconds;     /* MLC_NCU_TIME in seconds (its unit row or metric unit); 0 if absent */
  double mhz;         /* MLC_NCU_CLOCK in MHz; 0 if absent */
  double bytes;       /* MLC_NCU_BYTES in bytes; -1 if absent */
} mlc_ncu_row;

typedef struct {
  mlc_ncu_row *rows;
  uint32_t n;
} mlc_ncu_table;

/* Parses ncu's CSV text.  MLC_INVALID_ARGUMENT with a message when there is
 * no header with "Kernel Name", or the SM or memory throughput is missing. */
MLC_MUST_USE mlc_status mlc_ncu_parse_csv(const char *text, mlc_ncu_table *out);
void mlc_ncu_table_free(mlc_ncu_table *t);

/* The seed's rule (mlc_bound_rule): memory when hbm > 75 and sm < 25;
 * compute when sm > 75 and hbm < 50; otherwise neither (MLC_BOUND_LATENCY). */
mlc_bound mlc_ncu_verdict(double sm_pct, double hbm_pct);

/* "mlc_matmul_0123456789abcdef_1" (one launch of a kernel) -> its plan
 * symbol "mlc_matmul_0123456789abcdef" in buf; false if the name is not an
 * mlc kernel's launch. */
bool mlc_ncu_symbol(const char *kernel, char *buf, size_t n);

/* One of mlc's kernels beside ncu's measure of it. */
typedef struct mlc_ncu_match_s {
  const char *symbol;     /* the plan's kernel symbol */
  const char *label;      /* the step that stands for it (the longest), for the table */
  mlc_bound mlc;          /* mlc's verdict of the kernel: its steps' FLOPs, bytes and time summed */
  double mlc_pct;         /* its % of roof */
  uint32_t launches;      /* ncu rows that matched (0: ncu did not profile it) */
  double sm_pct, mem_pct, dram_pct; /* ncu's, time-weighted over those rows */
  mlc_bound ncu;
  bool agree;
  /* mlc's side of the rule (over every step of the kernel, as ncu's is
   * over its launches): compute and memory % of the hardware's peaks, the
   * bytes of one call as the plan counts them, and its launches */
  double mlc_compute, mlc_memory, mlc_bytes;
  uint32_t nlaunch;       /* launches per call; 0 means 1 */
  double ncu_mhz;         /* ncu's SM clock, time-weighted; 0 if absent */
  double ncu_bytes;       /* DRAM bytes ncu saw move in one call (a launch's mean x nlaunch); -1 if absent */
  double mlc_dram;        /* of mlc_bytes, those mlc expects to reach DRAM while it runs (mlc_profile_dram_bytes) */
} mlc_ncu_match;

/* Fills each match's ncu fields from the table's rows of its symbol (a
 * kernel's launches and repeated calls, weighted by duration).  Returns
 * the number of matches ncu profiled; *agree_out the fraction of those
 * whose verdicts agree (0 when none). */
uint32_t mlc_ncu_compare(const mlc_ncu_table *t, mlc_ncu_match *m, uint32_t n, double *agree_out);

/* The side-by-side table, disagreements marked, and the agreement line. */
void mlc_ncu_print(const mlc_ncu_match *m, uint32_t n, FILE *out);
/* The same as JSON: {"agreement": f, "compared": n, "kernels": [...]} */
void mlc_ncu_write_json(const mlc_ncu_match *m, uint32_t n, const char *device, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
