/* NanoDet-g as a model family (placeholder until the TF.js importer lands). */
#include "models/family.h"

ly_status ly_nanodet_load_model(const char *path, ly_model_desc *out)
{
    (void)path;
    (void)out;
    return LY_E_DECLINED;
}
