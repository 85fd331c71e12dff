/* gpa_other.h — the driver entry points that enqueue work (drv_hooks.def's PW_DRV_ENQUEUE) which
 * driver_prog's gpa-other mode takes through cuGetProcAddress_v2, and test_driver checks each
 * leads to pinwheel: one list for the program and its test. */
#ifndef PW_TESTS_GPA_OTHER_H
#define PW_TESTS_GPA_OTHER_H

static const char *const gpa_other_names[] = {"cuMemsetD8Async",
                                              "cuLaunchHostFunc",
                                              "cuGraphLaunch",
                                              "cuMemcpyHtoAAsync",
                                              "cuSignalExternalSemaphoresAsync",
                                              "cuGraphicsUnmapResources",
                                              "cuMemFreeAsync",
                                              "cuMemPoolImportPointer"};

#endif
