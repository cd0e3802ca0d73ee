/* SPDX-License-Identifier: MIT */
#include "providers/op_cache.h"
#include "ops/nn/reference.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

struct ly_op_entry {
    ly_op_entry *next; /* in its bucket; also links eviction victims */
    uint64_t hash;     /* of the key: picks the bucket, compared before the key */
    uint64_t last_used;
    ly_conv_key key;
    void *op;
    size_t users;        /* threads between acquire and release; guarded by the cache lock */
    pthread_mutex_t use; /* held by the one thread running the operator */
};

/* Weights sampled for the fingerprint: enough that a different tensor at a
 * reused address is caught, few enough to cost nothing per call. */
#define FINGERPRINT_SAMPLES 256

static uint64_t mix(uint64_t h, uint32_t v)
{
    h ^= v;
    h *= 0x100000001b3ull; /* FNV-1a prime */
    h ^= h >> 29;
    return h;
}

/* Element i of `t` as up to 32 bits (f32, or int8 codes widened). */
static uint32_t bits_of(const ly_tensor *t, int64_t i)
{
    size_t size = ly_dtype_size(t->dtype);
    uint32_t v = 0;
    memcpy(&v, (const char *)t->data + (size_t)i * size, size < sizeof v ? size : sizeof v);
    return v;
}

/* The weight sampled; the small per-channel inputs (bias, and conv2d_int8's
 * weight scales and input range) whole. */
static uint64_t fingerprint(const ly_kernel_call *call)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const ly_tensor *weight = call->in[1];
    int64_t n = ly_tensor_numel(weight);
    int64_t step = n > FINGERPRINT_SAMPLES ? n / FINGERPRINT_SAMPLES : 1;
    for (int64_t i = 0; i < n; i += step)
        h = mix(h, bits_of(weight, i));
    if (n > 0) h = mix(h, bits_of(weight, n - 1));
    static const int whole[] = {2, 4, 5, 6};
    for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++) {
        const ly_tensor *t = call->in[whole[k]];
        if (!t) continue;
        for (int64_t i = 0; i < ly_tensor_numel(t); i++)
            h = mix(h, bits_of(t, i));
    }
    return h;
}

uint64_t ly_conv_fingerprint(const ly_kernel_call *call)
{
    return fingerprint(call);
}

void ly_conv_key_init(ly_conv_key *key, const ly_kernel_call *call, int threads)
{
    ly_conv_key_init_with(key, call, threads, ly_conv_fingerprint(call));
}

void ly_conv_key_init_with(ly_conv_key *key, const ly_kernel_call *call, int threads,
                           uint64_t fingerprint_value)
{
    const ly_tensor *w = call->in[1], *b = call->in[2];
    ly_nn_conv_geometry g;
    ly_nn_conv_geometry_of(call, &g);
    memset(key, 0, sizeof *key); /* the key is hashed and compared as bytes */
    key->weight = w->data;
    key->bias = b ? b->data : NULL;
    key->fingerprint = fingerprint_value;
    key->n = g.n;
    key->c = g.c;
    key->h = g.h;
    key->w = g.w;
    key->o = g.o;
    key->kh = g.kh;
    key->kw = g.kw;
    key->ho = g.ho;
    key->wo = g.wo;
    key->sh = g.sh;
    key->sw = g.sw;
    key->ph = g.ph;
    key->pw = g.pw;
    key->dh = g.dh;
    key->dw = g.dw;
    key->groups = g.groups;
    key->activation = g.activation;
    key->has_residual = call->in[3] != NULL;
    if (g.activation == LY_ACT_LEAKY_RELU) memcpy(&key->alpha_bits, &g.alpha, sizeof g.alpha);
    if (g.post_affine) {
        key->post_affine = 1;
        memcpy(&key->post_scale_bits, &g.post_scale, sizeof g.post_scale);
        memcpy(&key->post_shift_bits, &g.post_shift, sizeof g.post_shift);
    }
    key->threads = threads;
}

static uint64_t key_hash(const ly_conv_key *key)
{
    uint32_t words[sizeof *key / sizeof(uint32_t)];
    memcpy(words, key, sizeof words);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        h = mix(h, words[i]);
    return h;
}

static ly_op_entry **bucket_of(ly_op_cache *cache, uint64_t hash)
{
    return &cache->buckets[hash % LY_OP_CACHE_BUCKETS];
}

static ly_op_entry *find_locked(ly_op_cache *cache, const ly_conv_key *key, uint64_t hash)
{
    for (ly_op_entry *e = *bucket_of(cache, hash); e; e = e->next)
        if (e->hash == hash && memcmp(&e->key, key, sizeof *key) == 0) {
            e->last_used = ++cache->clock;
            return e;
        }
    return NULL;
}

/* Unlink the least recently used idle entries while over capacity (a scan of
 * every entry, but only when the cache is full); returns them. */
static ly_op_entry *evict_locked(ly_op_cache *cache)
{
    ly_op_entry *victims = NULL;
    while (cache->count > cache->capacity) {
        ly_op_entry **oldest = NULL;
        for (size_t b = 0; b < LY_OP_CACHE_BUCKETS; b++)
            for (ly_op_entry **slot = &cache->buckets[b]; *slot; slot = &(*slot)->next)
                if ((*slot)->users == 0 && (!oldest || (*slot)->last_used < (*oldest)->last_used))
                    oldest = slot;
        if (!oldest) break; /* every entry is in use: stay over capacity until released */
        ly_op_entry *e = *oldest;
        *oldest = e->next;
        e->next = victims;
        victims = e;
        cache->count--;
    }
    return victims;
}

static void destroy_entries(ly_op_cache *cache, ly_op_entry *list)
{
    while (list) {
        ly_op_entry *next = list->next;
        cache->destroy(list->op);
        pthread_mutex_destroy(&list->use);
        free(list);
        list = next;
    }
}

ly_status ly_op_cache_acquire(ly_op_cache *cache, const ly_conv_key *key, ly_op_create_fn create,
                              const ly_kernel_call *call, ly_op_entry **entry, void **op)
{
    uint64_t hash = key_hash(key);
    pthread_mutex_lock(&cache->lock);
    ly_op_entry *e = find_locked(cache, key, hash);
    if (e) e->users++;
    pthread_mutex_unlock(&cache->lock);

    if (!e) {
        /* Built without the lock: preparing an operator can take milliseconds. */
        ly_status st = LY_OK;
        void *fresh = create(key, call, &st);
        if (!fresh) return st != LY_OK ? st : LY_E_PROVIDER;
        ly_op_entry *made = calloc(1, sizeof *made);
        if (!made || pthread_mutex_init(&made->use, NULL) != 0) {
            free(made);
            cache->destroy(fresh);
            return ly_set_error(LY_E_NO_MEMORY, "conv2d: out of memory for the operator cache");
        }
        made->key = *key;
        made->hash = hash;
        made->op = fresh;
        ly_op_entry *victims = NULL;
        pthread_mutex_lock(&cache->lock);
        e = find_locked(cache, key, hash); /* another thread may have built it meanwhile */
        if (!e) {
            e = made;
            made = NULL;
            ly_op_entry **bucket = bucket_of(cache, hash);
            e->next = *bucket;
            *bucket = e;
            e->last_used = ++cache->clock;
            cache->count++;
        }
        e->users++;
        victims = evict_locked(cache);
        pthread_mutex_unlock(&cache->lock);
        if (made) {
            made->next = victims;
            victims = made;
        }
        destroy_entries(cache, victims);
    }
    pthread_mutex_lock(&e->use);
    *entry = e;
    *op = e->op;
    return LY_OK;
}

void ly_op_cache_release(ly_op_cache *cache, ly_op_entry *entry)
{
    pthread_mutex_unlock(&entry->use);
    pthread_mutex_lock(&cache->lock);
    entry->users--;
    ly_op_entry *victims = evict_locked(cache);
    pthread_mutex_unlock(&cache->lock);
    destroy_entries(cache, victims);
}

/* ---- per-thread scratch ---------------------------------------------------------------- */

typedef struct scratch_set {
    void *data[LY_NN_SCRATCH_BUFFERS];
    size_t size[LY_NN_SCRATCH_BUFFERS];
    bool mapped[LY_NN_SCRATCH_BUFFERS];
} scratch_set;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

/* Large buffers are mapped pages of their own: growing one gives the old
 * pages back whole, where a heap block left a hole as large whenever anything
 * had been allocated after it (LibreYOLO9t: 3.2 MiB of RSS). */
#define SCRATCH_MAP_BYTES ((size_t)1 << 20)

static void *scratch_alloc(size_t bytes, bool *mapped)
{
    *mapped = false;
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    if (bytes >= SCRATCH_MAP_BYTES) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            *mapped = true;
            return p;
        }
    }
#endif
    return aligned_alloc(64, bytes);
}

static void scratch_free(void *p, size_t bytes, bool mapped)
{
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    if (mapped) {
        munmap(p, bytes);
        return;
    }
#else
    (void)bytes;
    (void)mapped;
#endif
    free(p);
}

static void free_scratch(void *p)
{
    scratch_set *set = p;
    for (int i = 0; i < LY_NN_SCRATCH_BUFFERS; i++)
        if (set->data[i]) scratch_free(set->data[i], set->size[i], set->mapped[i]);
    free(set);
}

static void make_scratch_key(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, free_scratch) == 0;
}

void *ly_nn_scratch(int index, size_t bytes)
{
    if (index < 0 || index >= LY_NN_SCRATCH_BUFFERS) return NULL;
    pthread_once(&scratch_once, make_scratch_key);
    if (!scratch_key_ok) return NULL;
    scratch_set *set = pthread_getspecific(scratch_key);
    if (!set) {
        set = calloc(1, sizeof *set);
        if (!set || pthread_setspecific(scratch_key, set) != 0) {
            free(set);
            return NULL;
        }
    }
    if (set->size[index] >= bytes && set->data[index]) return set->data[index];
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    /* The old contents are not kept, so free first: the allocator can then
     * grow the block in place instead of leaving a hole of every past size. */
    if (set->data[index]) scratch_free(set->data[index], set->size[index], set->mapped[index]);
    set->data[index] = NULL;
    set->size[index] = 0;
    bool mapped;
    void *p = scratch_alloc(rounded, &mapped);
    if (!p) return NULL;
    set->mapped[index] = mapped;
    ly_log(LY_LOG_DEBUG, "nn scratch %d: %zu bytes", index, rounded);
    set->data[index] = p;
    set->size[index] = rounded;
    return p;
}
