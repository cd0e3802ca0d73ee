/* SPDX-License-Identifier: MIT */
/* Which stateful forms take a neighbouring node into their own pass
 * (registry_internal.h). */
#include "kernels/registry_internal.h"

#include <pthread.h>
#include <stddef.h>

enum { MAX_FOLDS = 8 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const ly_kernel_stateful *stateful;
    ly_kernel_folds folds;
} table[MAX_FOLDS];
static int n_table;

void ly_kernel_folds_register(const ly_kernel_stateful *stateful, const ly_kernel_folds *folds)
{
    pthread_mutex_lock(&lock);
    bool known = false;
    for (int i = 0; i < n_table; i++)
        known |= table[i].stateful == stateful;
    if (!known && n_table < MAX_FOLDS) {
        table[n_table].stateful = stateful;
        table[n_table].folds = *folds;
        n_table++;
    }
    pthread_mutex_unlock(&lock);
}

ly_kernel_folds ly_kernel_folds_of(const ly_kernel_stateful *stateful)
{
    ly_kernel_folds folds = {0};
    if (!stateful) return folds;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_table; i++)
        if (table[i].stateful == stateful) folds = table[i].folds;
    pthread_mutex_unlock(&lock);
    return folds;
}
