/* .safetensors: the header JSON, the tensor table and its tiling of the data
 * section, the metadata (class names), then the model load from a file. */
#include "fuzz.h"

#include "libreyolo/checkpoint.h"
#include "libreyolo/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ly_fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ly_checkpoint *ck = NULL;
    if (ly_checkpoint_open_buffer(data, size, "fuzz.safetensors", &ck) != LY_OK) return 0;
    ly_checkpoint_close(ck);
    const char *path = ly_fuzz_file("fuzz.safetensors", data, size);
    ly_model *m = NULL;
    if (path && ly_model_load(path, NULL, &m) == LY_OK) ly_model_free(m);
    return 0;
}
