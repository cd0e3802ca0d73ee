/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The handler is process-wide logging configuration, set by the embedding
 * application; reads and writes go through one mutex. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static ly_log_fn log_handler;
static void *log_user;
static ly_log_level log_min_level = LY_LOG_WARNING;
static bool log_configured;

/* Keys already warned about by ly_warn_once: a small append-only list. */
typedef struct once_key {
    struct once_key *next;
    char key[];
} once_key;
static once_key *warned_keys;

static ly_log_level level_from_env(void)
{
    const char *v = getenv("LIBREYOLO_LOG");
    if (!v || !*v) return LY_LOG_WARNING;
    static const struct {
        const char *name;
        ly_log_level level;
    } names[] = {{"debug", LY_LOG_DEBUG},  {"info", LY_LOG_INFO},   {"warning", LY_LOG_WARNING},
                 {"warn", LY_LOG_WARNING}, {"error", LY_LOG_ERROR}, {"off", LY_LOG_OFF}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(v, names[i].name) == 0) return names[i].level;
    /* Straight to stderr, once: this runs with the log lock held. */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr,
                "libreyolo: warning: LIBREYOLO_LOG='%.40s' is not a level (debug, info, warning, "
                "error, off): using warning\n",
                v);
    return LY_LOG_WARNING;
}

ly_status ly_set_log_handler(ly_log_fn fn, void *user, ly_log_level min_level)
{
    if (min_level < LY_LOG_DEBUG || min_level > LY_LOG_OFF)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_set_log_handler: min_level %d is not a ly_log_level",
                            (int)min_level);
    pthread_mutex_lock(&log_lock);
    log_handler = fn;
    log_user = user;
    log_min_level = fn ? min_level : level_from_env();
    log_configured = true;
    pthread_mutex_unlock(&log_lock);
    return LY_OK;
}

static const char *level_word(ly_log_level level)
{
    switch (level) {
    case LY_LOG_DEBUG:
        return "debug";
    case LY_LOG_INFO:
        return "info";
    case LY_LOG_WARNING:
        return "warning";
    default:
        return "error";
    }
}

static void log_message(ly_log_level level, const char *fmt, va_list ap)
{
    char message[1024];
    vsnprintf(message, sizeof message, fmt, ap);
    pthread_mutex_lock(&log_lock);
    if (!log_configured) {
        log_min_level = level_from_env();
        log_configured = true;
    }
    if (level >= log_min_level) {
        if (log_handler)
            log_handler(level, message, log_user);
        else
            fprintf(stderr, "libreyolo: %s: %s\n", level_word(level), message);
    }
    pthread_mutex_unlock(&log_lock);
}

void ly_log(ly_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_message(level, fmt, ap);
    va_end(ap);
}

void ly_warn_once(const char *key, const char *fmt, ...)
{
    bool first = true;
    pthread_mutex_lock(&log_lock);
    for (once_key *k = warned_keys; k; k = k->next)
        if (strcmp(k->key, key) == 0) first = false;
    if (first) {
        size_t n = strlen(key) + 1;
        once_key *k = malloc(sizeof *k + n);
        if (k) {
            memcpy(k->key, key, n);
            k->next = warned_keys;
            warned_keys = k;
        }
    }
    pthread_mutex_unlock(&log_lock);
    if (!first) return;
    va_list ap;
    va_start(ap, fmt);
    log_message(LY_LOG_WARNING, fmt, ap);
    va_end(ap);
}
