# The library's layers (docs/ARCHITECTURE.md): core → kernels → attention → nn → models → explain.
# Each is a static library, qkv_<layer>, built from src/<layer>/ and linking only the layer to its
# left. A layer's sources compile against an include root of its own, build/layers/<layer>/, that
# holds links to src/<layer>/ and the folders of the layers to its left, and to the public headers
# (include/qkv/) of those layers — nothing else. Including a header of a higher layer is therefore
# a compile error ("No such file or directory"); tests/layers/ checks that it is.

set(QKV_LAYERS core kernels attention nn models explain)
# Side layers branch off the chain: they see a layer and those to its left, and no layer sees them.
# distributed (ring attention over MPI) sits above attention; it is built only where MPI is found.
set(QKV_SIDE_LAYERS distributed)
set(QKV_SIDE_BASE_distributed attention)
# The layer each public header belongs to: a layer sees its own and those of the layers before it.
set(QKV_PUBLIC_HEADERS_core tensor.h npy.h files.h threads.h json.h memory.h field_error.h terminal.h
    lines.h parse.h)
set(QKV_PUBLIC_HEADERS_kernels attention_types.h blas.h device.h)
set(QKV_PUBLIC_HEADERS_attention attention.h attention_weights.h)
set(QKV_PUBLIC_HEADERS_nn nn_modules.h nn_attention.h nn_recurrent.h nn_training.h nn.h)
set(QKV_PUBLIC_HEADERS_models text.h sentence_model.h causal_lm.h tasks.h seq2seq.h model.h train.h
    experiment.h perceiver.h finite.h residual.h model_stores.h)
set(QKV_PUBLIC_HEADERS_explain explain.h explain_focus.h explain_run.h explain_readings.h explain_views.h explain_report.h
    explain_lens.h explain_circuits.h explain_generation.h
    attend.h)
set(QKV_PUBLIC_HEADERS_distributed distributed.h)

# Every header of include/qkv/ must be given a layer above.
file(GLOB qkv_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include/qkv CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/qkv/*.h)
foreach(header ${qkv_public_headers})
  set(found FALSE)
  foreach(layer ${QKV_LAYERS} ${QKV_SIDE_LAYERS})
    if(header IN_LIST QKV_PUBLIC_HEADERS_${layer})
      set(found TRUE)
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "include/qkv/${header} belongs to no layer: add it to a "
                        "QKV_PUBLIC_HEADERS_<layer> list in cmake/qkvLayers.cmake")
  endif()
endforeach()

# qkv_layer(<layer> [SOURCES generated.cpp...]): the target qkv_<layer> and its include root.
set(qkv_seen_folders "")
set(qkv_seen_headers "")
set(qkv_previous_layer "")
# qkv_layer(<side layer> BASE <layer>): a side layer, on top of <layer> (built before it).
function(qkv_layer layer)
  cmake_parse_arguments(arg "" "BASE" "SOURCES" ${ARGN})
  if(arg_BASE)
    set(qkv_seen_folders ${QKV_LAYER_FOLDERS_${arg_BASE}})
    set(qkv_seen_headers ${QKV_LAYER_HEADERS_${arg_BASE}})
    set(qkv_previous_layer ${arg_BASE})
  endif()
  list(APPEND qkv_seen_folders ${layer})
  list(APPEND qkv_seen_headers ${QKV_PUBLIC_HEADERS_${layer}})
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/qkv)
  foreach(folder ${qkv_seen_folders})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
  endforeach()
  foreach(header ${qkv_seen_headers})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/qkv/${header} ${root}/qkv/${header} SYMBOLIC)
  endforeach()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp)
  add_library(qkv_${layer} STATIC ${sources} ${arg_SOURCES})
  add_library(qkv::${layer} ALIAS qkv_${layer})
  target_include_directories(qkv_${layer} PRIVATE ${root})
  target_compile_features(qkv_${layer} PUBLIC cxx_std_20)
  # Designated initializers (docs/CONVENTIONS.md §4.1) leave fields at their defaults.
  target_compile_options(qkv_${layer} PRIVATE -Wall -Wextra -Wpedantic
                                              -Wno-missing-field-initializers)
  set_target_properties(qkv_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(qkv_previous_layer)
    target_link_libraries(qkv_${layer} PUBLIC qkv_${qkv_previous_layer})
  endif()
  if(QKV_SANITIZE)
    # A sanitized static library needs the sanitizer runtimes wherever it is linked.
    target_link_options(qkv_${layer} PUBLIC -fsanitize=address,undefined)
  endif()

  set(QKV_LAYER_ROOT_${layer} ${root} PARENT_SCOPE)
  set(QKV_LAYER_FOLDERS_${layer} ${qkv_seen_folders} PARENT_SCOPE)
  set(QKV_LAYER_HEADERS_${layer} ${qkv_seen_headers} PARENT_SCOPE)
  if(arg_BASE)
    return()  # the chain goes on from where it was
  endif()
  set(qkv_seen_folders ${qkv_seen_folders} PARENT_SCOPE)
  set(qkv_seen_headers ${qkv_seen_headers} PARENT_SCOPE)
  set(qkv_previous_layer ${layer} PARENT_SCOPE)
endfunction()
