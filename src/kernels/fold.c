/* SPDX-License-Identifier: MIT */
/* Which stateful forms take a following activation (registry_internal.h). */
#include "kernels/registry_internal.h"

#include <pthread.h>
#include <stddef.h>

enum { MAX_FOLDS = 8 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const ly_kernel_stateful *stateful;
    ly_fold_activation_fn fn;
} folds[MAX_FOLDS];
static int n_folds;

void ly_fold_activation_register(const ly_kernel_stateful *stateful, ly_fold_activation_fn fn)
{
    pthread_mutex_lock(&lock);
    bool known = false;
    for (int i = 0; i < n_folds; i++)
        known |= folds[i].stateful == stateful;
    if (!known && n_folds < MAX_FOLDS) {
        folds[n_folds].stateful = stateful;
        folds[n_folds].fn = fn;
        n_folds++;
    }
    pthread_mutex_unlock(&lock);
}

ly_fold_activation_fn ly_fold_activation_of(const ly_kernel_stateful *stateful)
{
    ly_fold_activation_fn fn = NULL;
    if (!stateful) return NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_folds && !fn; i++)
        if (folds[i].stateful == stateful) fn = folds[i].fn;
    pthread_mutex_unlock(&lock);
    return fn;
}
