/* Parity cases of the sdpa slots: placeholder until they land. */
#include "kernels/check.h"

ly_status ly_check_sdpa_slot(const char *slot, const ly_check_options *options,
                             ly_check_report_fn report, void *user, int *n_matched)
{
    (void)slot;
    (void)options;
    (void)report;
    (void)user;
    (void)n_matched;
    return LY_OK;
}
