# OpenBLAS through CBLAS, as the imported target OpenBLAS::OpenBLAS. Debian's OpenBLASConfig.cmake
# (0.3.21) only sets OpenBLAS_INCLUDE_DIRS and OpenBLAS_LIBRARIES; newer releases define the target
# themselves. Used by the build and by the installed qkvConfig.cmake: a static libqkv needs OpenBLAS
# wherever it is linked. Call after find_package(OpenBLAS CONFIG) / find_dependency(OpenBLAS CONFIG).
if(NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS INTERFACE IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()
