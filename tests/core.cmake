# Core compiler tests: golden IR/AST/stats dumps, the PyTorch state_dict check,
# and unit tests of the IR.  Included from tests/CMakeLists.txt.

set(MLC_ROOT ${CMAKE_SOURCE_DIR})
set(SMALL vocab=512 dim=128 layers=2 heads=4 batch=2 seq=64)

# golden.NAME: `mlc ARGS` from the repository root must print tests/golden/FILE exactly.
function(mlc_golden name file)
  add_test(NAME golden.${name}
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/run_golden.py ${MLC_ROOT} ${MLC_ROOT}/tests/golden/${file} -- $<TARGET_FILE:mlc> ${ARGN})
  set_tests_properties(golden.${name} PROPERTIES LABELS golden TIMEOUT 60)
endfunction()

mlc_golden(minillm.ir        minillm.ir        compile examples/minillm.mdl --emit ir)
mlc_golden(minillm_small.ir  minillm_small.ir  compile examples/minillm.mdl --emit ir ${SMALL})
mlc_golden(minillm.ast       minillm.ast       compile examples/minillm.mdl --emit ast)
mlc_golden(minillm.stats     minillm.stats     compile examples/minillm.mdl --stats)
# --no-train: the forward alone, no train step and no optimizer state (issue 25)
mlc_golden(minillm_notrain.stats minillm_notrain.stats compile examples/minillm.mdl --no-train --stats)
mlc_golden(mlp.ir            mlp.ir            compile examples/mlp.mdl --emit ir)
mlc_golden(linear.ir         linear.ir         compile examples/linear.mdl --emit ir)
mlc_golden(print_after_all   mlp.print_after   compile examples/mlp.mdl --print-after=all)
# --quantize (issue 29): each linear over an f32 weight becomes qlinear over its packed form
# (with f32 scales: a word a scale)
mlc_golden(mlp.quantize      mlp.quantize      compile examples/mlp.mdl --quantize int8:group=16:scales=f32 --print-after=quantize)
# ... and with :asym and bf16 scales (the default): its packed parameters (codes, then a scale and a min a
# word), qlinear asym=1, --stats, and a fused group's program headed by qlinear.4.16.asym
mlc_golden(mlp.quantize_asym mlp.quantize_asym compile examples/mlp.mdl --quantize int4:group=16:asym --print-after=quantize)
mlc_golden(mlp_asym.stats    mlp_asym.stats    compile examples/mlp.mdl --quantize int4:group=16:asym --stats)
mlc_golden(mlp_asym.fuse_cuda mlp_asym.fuse_cuda compile examples/mlp.mdl --target cuda --quantize int4:group=16:asym
           --print-after=fuse -o ${CMAKE_CURRENT_BINARY_DIR}/golden_asym_fuse_cuda)
# --matmul=fp8 (issue 30): each linear's three GEMMs as scaled_mm of quant(...) operands, the head kept;
# and the MiniLLM's verdicts per linear in --stats
mlc_golden(mlp.fp8           mlp.fp8           compile examples/mlp.mdl --matmul=fp8 --print-after=fp8)
mlc_golden(minillm_small_fp8.stats minillm_small_fp8.stats compile examples/minillm.mdl --matmul=fp8 --stats ${SMALL} compute=bf16)
# precision(matmul=fp8, fp8_grad=e4m3, fp8_keep=[...]) in the train block: the listed scopes stay f32, the head converts
mlc_golden(fp8_keep.stats    fp8_keep.stats    compile tests/golden/fp8_keep.mdl --stats)
# the fuse pass (GPU targets): fused groups, GEMM epilogues, adamw_multi (CUDA) on the small MiniLLM
mlc_golden(minillm_small.fuse_cuda minillm_small.fuse_cuda compile examples/minillm.mdl --target cuda --print-after=fuse
           -o ${CMAKE_CURRENT_BINARY_DIR}/golden_fuse_cuda ${SMALL})
# the fsdp pass (CPU, one process): flat units, gathers prefetched one unit ahead, reduce-scatter + update per unit
mlc_golden(minillm_small.fsdp minillm_small.fsdp.ir compile examples/minillm.mdl --fsdp --emit ir ${SMALL})
# the same with reduce=bf16: bf16 gradients packed as they are (no cast to f32 and back), the
# reduce-scatter in bf16, its rows cast to f32 for the update
mlc_golden(minillm_small.fsdp_bf16 minillm_small.fsdp_bf16.ir compile examples/minillm.mdl --fsdp --emit ir ${SMALL} reduce=bf16)
mlc_golden(help              help.txt          --help)
if(MLC_FRONTEND_ONNX)
  # onnx("...") as a module: the graph's parameters, its nodes in each entry, autodiff and SGD over them
  mlc_golden(onnx_module.ir  onnx_module.ir    compile tests/golden/onnx_module.mdl --emit ir)
endif()
# A decode block's prefill and step entries: inputs, the KV caches, attention_kv.
mlc_golden(minillm_causal_small.ir minillm_causal_small.ir compile examples/minillm_causal.mdl --no-train --emit ir
           layers=1 max_ctx=32 prefill=8)
# the microbatch pass: accum = 2 runs micro-batch 1's forward and backward, then micro-batch 0's
mlc_golden(mlp_accum.microbatch mlp_accum.microbatch compile examples/mlp.mdl --accum 2 --print-after=microbatch)
# its planned memory: 4 micro-batches of 2 hold about one micro-batch's activations (batch=8 at accum 1: 6,951,680 bytes)
mlc_golden(minillm_small_accum.stats minillm_small_accum.stats compile examples/minillm.mdl --stats --accum 4 ${SMALL})
# a memory budget that cheap values alone cannot meet (they reach 7.85 MB): layer 0's forward runs again
mlc_golden(minillm_small_budget.stats minillm_small_budget.stats compile examples/minillm.mdl --stats --memory-budget 7.4MB ${SMALL})

# The parameter names, order and shapes must be PyTorch's state_dict.
add_test(NAME ref.state_dict.minillm
  COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/check_state_dict.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl)
add_test(NAME ref.state_dict.minillm_small
  COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/check_state_dict.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl ${SMALL})
set_tests_properties(ref.state_dict.minillm ref.state_dict.minillm_small PROPERTIES LABELS ref TIMEOUT 120)

# Parse + lower + shape-check the full MiniLLM well under 50 ms (median of 20 runs).
add_test(NAME perf.frontend.minillm
  COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/frontend_time.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl 50)
set_tests_properties(perf.frontend.minillm PROPERTIES LABELS unit TIMEOUT 60)

find_package(PkgConfig REQUIRED)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
add_executable(test_ir ${MLC_ROOT}/tests/unit/test_ir.c)
target_link_libraries(test_ir PRIVATE mlccore PkgConfig::CMOCKA)
target_compile_definitions(test_ir PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
add_test(NAME unit.ir COMMAND test_ir)
set_tests_properties(unit.ir PROPERTIES LABELS unit TIMEOUT 60)

# The plan format, from the compiler's encoder to the runtime's reader.
if(TARGET mlcrt)
  # the fsdp pass and the plan's schedule: streams, and no step before what it depends on
  add_executable(test_schedule ${MLC_ROOT}/tests/unit/test_schedule.c)
  target_link_libraries(test_schedule PRIVATE mlccore PkgConfig::CMOCKA)
  target_compile_definitions(test_schedule PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
  add_test(NAME unit.schedule COMMAND test_schedule)
  set_tests_properties(unit.schedule PROPERTIES LABELS unit TIMEOUT 120)
  add_executable(test_plan ${MLC_ROOT}/tests/unit/test_plan.c)
  target_link_libraries(test_plan PRIVATE mlccore mlcrt PkgConfig::CMOCKA)
  target_compile_definitions(test_plan PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
  add_test(NAME unit.plan COMMAND test_plan)
  set_tests_properties(unit.plan PROPERTIES LABELS unit TIMEOUT 120)
  if(MLC_VALGRIND AND NOT MLC_SANITIZE AND NOT MLC_FUZZ)
    add_test(NAME valgrind.plan COMMAND ${MLC_VALGRIND} --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=all
             $<TARGET_FILE:test_plan>)
    set_tests_properties(valgrind.plan PROPERTIES LABELS "runtime;valgrind" TIMEOUT 600)
  endif()
endif()

# The CPU target end to end, against PyTorch.
if(MLC_BACKEND_CPU)
  add_test(NAME ref.run.minillm_small
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/run_minillm.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl
            ${CMAKE_CURRENT_BINARY_DIR}/run_minillm)
  add_test(NAME ref.app.mlp
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/app_check.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/app_check)
  # The artifact moved, then built with CMake (C and C++), pkg-config and one cc line.
  add_test(NAME ref.artifact.mlp
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/artifact_check.py $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/artifact_check ${MLC_RUNTIME_LINK_OPTIONS})
  # Two models in one application, the checked calls, two threads, the version check.
  add_test(NAME runtime.two_models
    COMMAND ${MLC_ROOT}/tests/packaging/two_models.sh $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/two_models ${MLC_RUNTIME_LINK_OPTIONS})
  set_tests_properties(runtime.two_models PROPERTIES LABELS "runtime;cpu" TIMEOUT 300)
  # Weights from memory against the file, truncated and corrupted bytes; an
  # allocator passed in (counted, and refusing each request of create in turn).
  add_test(NAME runtime.artifact_api
    COMMAND ${MLC_ROOT}/tests/packaging/artifact_api.sh $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/artifact_api ${MLC_RUNTIME_LINK_OPTIONS})
  set_tests_properties(runtime.artifact_api PROPERTIES LABELS "runtime;cpu" TIMEOUT 300)
  # <name>_generate (issue 29): an application's greedy and sampled tokens equal mlc generate's; its refusals.
  add_test(NAME runtime.generate_app
    COMMAND ${MLC_ROOT}/tests/packaging/generate_app.sh $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/generate_app ${MLC_RUNTIME_LINK_OPTIONS})
  set_tests_properties(runtime.generate_app PROPERTIES LABELS "runtime;cpu" TIMEOUT 300)
  # --cpu and --triple: the baseline artifact against the native one, a CPU
  # feature this host lacks refused at create, bad names refused at compile.
  add_test(NAME runtime.cpu_targets
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/cpu_targets.py $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/cpu_targets ${MLC_RUNTIME_LINK_OPTIONS})
  set_tests_properties(runtime.cpu_targets PROPERTIES LABELS "runtime;cpu" TIMEOUT 300)
  # The CPU object cache: hits give the same bytes; damaged, cut or swapped
  # files are compiled again; another --cpu has its own; MLC_CPU_CACHE=0.
  add_test(NAME runtime.cpu_cache
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/cpu_cache.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/cpu_cache)
  set_tests_properties(runtime.cpu_cache PROPERTIES LABELS "runtime;cpu" TIMEOUT 300)
  add_test(NAME ref.run.errors
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/run_errors.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/run_errors)
  # Several named outputs per entry: the C signature, mlc run's --output
  # NAME=FILE and a train block taking the loss by index, against torch.
  add_test(NAME ref.run.outputs
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/outputs.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/outputs)
  # Cross-attention trains: an encoder-decoder's logits and AdamW losses against torch.
  add_test(NAME ref.train.encdec
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/encdec.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/encdec)
  # Dropout's Philox masks in training against torch, none in the forward.
  add_test(NAME ref.train.dropout
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/dropout.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/dropout)
  foreach(mode f32 bf16)
    add_test(NAME ref.train.minillm_small.${mode}
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/train_minillm.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl
              ${CMAKE_CURRENT_BINARY_DIR}/train_minillm_${mode} ${mode})
  endforeach()
  set_tests_properties(ref.run.minillm_small ref.app.mlp ref.artifact.mlp ref.run.errors ref.run.outputs ref.train.dropout ref.train.encdec ref.train.minillm_small.f32
                       ref.train.minillm_small.bf16 PROPERTIES
                       LABELS "ref;cpu" TIMEOUT 300)
  # numpy arrays bound in place of the arena (issue 26): through the artifact's
  # runtime and through mlc.load, against the copying path bit for bit.
  add_test(NAME ref.python.zero_copy
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/zero_copy.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/zero_copy)
  set_tests_properties(ref.python.zero_copy PROPERTIES LABELS "ref;cpu" TIMEOUT 120 SKIP_RETURN_CODE 77)
  if(MLC_SANITIZE) # their Python-binding parts dlopen an instrumented runtime into a python3 without ASan
    set_tests_properties(ref.run.outputs ref.train.dropout ref.python.zero_copy PROPERTIES ENVIRONMENT MLC_SANITIZED=1)
  endif()
  # Incremental decoding (issue 29): mlc generate's greedy tokens and each
  # step's logits against PyTorch's f32 greedy decode, from the same weights.
  add_test(NAME ref.decode
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/decode.py $<TARGET_FILE:mlc>
            ${MLC_ROOT}/examples/minillm_causal.mdl ${CMAKE_CURRENT_BINARY_DIR}/ref_decode)
  set_tests_properties(ref.decode PROPERTIES LABELS "unit;cpu" TIMEOUT 300)
  if(MLC_BACKEND_SPIRV)
    # the same greedy decode through the SPIR-V target (attention_kv over the caches) on lavapipe
    add_test(NAME spirv.decode
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/decode.py $<TARGET_FILE:mlc>
              ${MLC_ROOT}/examples/minillm_causal.mdl ${CMAKE_CURRENT_BINARY_DIR}/spirv_decode --target spirv)
    set_tests_properties(spirv.decode PROPERTIES LABELS spirv TIMEOUT 600 SKIP_RETURN_CODE 77
                         ENVIRONMENT "MLC_VK_VALIDATE=1;XDG_CACHE_HOME=${CMAKE_CURRENT_BINARY_DIR}/spirv_cache_decode")
  endif()
  # --quantize int8|int4 (issue 29): qlinear against numpy's dequantised product, the
  # rounding's error bound against f32, groups of 32 to 256, one row and seven.
  add_test(NAME ref.quant
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/quant.py $<TARGET_FILE:mlc> ${CMAKE_CURRENT_BINARY_DIR}/ref_quant)
  set_tests_properties(ref.quant PROPERTIES LABELS "unit;cpu" TIMEOUT 120)
  if(MLC_BACKEND_SPIRV)
    add_test(NAME spirv.quant
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/quant.py $<TARGET_FILE:mlc> ${CMAKE_CURRENT_BINARY_DIR}/spirv_quant --target spirv)
    set_tests_properties(spirv.quant PROPERTIES LABELS spirv TIMEOUT 600 SKIP_RETURN_CODE 77
                         ENVIRONMENT "MLC_VK_VALIDATE=1;XDG_CACHE_HOME=${CMAKE_CURRENT_BINARY_DIR}/spirv_cache_quant")
  endif()
  add_test(NAME ref.train.data_and_init
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/train_data.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl
            ${CMAKE_CURRENT_BINARY_DIR}/train_data)
  set_tests_properties(ref.train.data_and_init PROPERTIES LABELS "ref;cpu" TIMEOUT 600)
  # --input NAME=FILE (.npy, safetensors): batches in order and shuffled, the
  # validation loss, against torch SGD; every error of the data and the flags.
  add_test(NAME ref.train.inputs
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/train_inputs.py $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/train_inputs)
  set_tests_properties(ref.train.inputs PROPERTIES LABELS "ref;cpu" TIMEOUT 600)
  # Learning-rate schedules, gradient clipping and accumulation against torch
  # (AdamW/SGD, LambdaLR, clip_grad_norm_, one batch of 4B); resume continues
  # the schedule; the settings' errors at file:line:col.
  add_test(NAME ref.train.schedule
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/train_schedule.py $<TARGET_FILE:mlc> ${CMAKE_CURRENT_BINARY_DIR}/train_schedule)
  set_tests_properties(ref.train.schedule PROPERTIES LABELS "ref;cpu" TIMEOUT 600)
  # SIGINT/SIGTERM mid-run, resume: the final checkpoint equals an uninterrupted run's; --save-every.
  add_test(NAME ref.train.interrupt
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/train_interrupt.py $<TARGET_FILE:mlc> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/train_interrupt)
  set_tests_properties(ref.train.interrupt PROPERTIES LABELS "ref;cpu" TIMEOUT 300)
  # The Python binding (python/mlc) on an artifact, against PyTorch, and
  # examples/digits: at least 95 % held-out accuracy from the CLI and from
  # Python (python3-sklearn's data).  Not under the sanitizers: the binding
  # dlopens the artifact's instrumented runtime into a python3 without ASan.
  if(NOT MLC_SANITIZE)
    add_test(NAME ref.python.binding
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/python/test_mlc.py $<TARGET_FILE:mlc> ${MLC_ROOT}
              ${CMAKE_CURRENT_BINARY_DIR}/python_binding)
    add_test(NAME ref.digits
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/digits.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/digits)
    set_tests_properties(ref.python.binding ref.digits PROPERTIES LABELS "ref;cpu" TIMEOUT 300)
    # Model.generate (the decode entries from Python) against PyTorch's greedy decode.
    add_test(NAME ref.decode.python
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/decode_python.py $<TARGET_FILE:mlc>
              ${MLC_ROOT}/examples/minillm_causal.mdl ${CMAKE_CURRENT_BINARY_DIR}/ref_decode_python)
    set_tests_properties(ref.decode.python PROPERTIES LABELS "unit;cpu" TIMEOUT 300)
    # --quantize int4 in an artifact: the Python binding's session packs the weights it initialises.
    add_test(NAME ref.quant.python
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/quant_python.py $<TARGET_FILE:mlc>
              ${MLC_ROOT}/examples/minillm_causal.mdl ${CMAKE_CURRENT_BINARY_DIR}/ref_quant_python)
    set_tests_properties(ref.quant.python PROPERTIES LABELS "unit;cpu" TIMEOUT 120)
    # examples/kjv: a byte-level LM on Debian's King James Bible (bible-kjv), 200 steps.
    add_test(NAME ref.kjv
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/kjv.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/kjv)
    set_tests_properties(ref.kjv PROPERTIES LABELS "ref;cpu;slow" TIMEOUT 600)
    # --quantize on real text (issue 29): gpt2.mdl small trained 600 steps on the KJV, then the
    # held-out perplexity in f32, int8 and int4: int4 within 2 %, int8 within 0.5 % (about 40 s).
    add_test(NAME ref.quant_ppl
      COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/quant_ppl.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/quant_ppl)
    set_tests_properties(ref.quant_ppl PROPERTIES LABELS "ref;cpu;slow" TIMEOUT 600)
  endif()
  # Resume, kill during a save, corrupt files: a dozen compiles, so "slow".
  add_test(NAME ref.train.checkpoints
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/checkpoint_check.py $<TARGET_FILE:mlc> ${MLC_ROOT}/examples/minillm.mdl
            ${CMAKE_CURRENT_BINARY_DIR}/checkpoints)
  set_tests_properties(ref.train.checkpoints PROPERTIES LABELS "ref;cpu;slow" TIMEOUT 900)
endif()

# ---- autodiff (begin) ------------------------------------------------------
# The gradient graph: outputs, names, shapes, scopes, errors.
add_executable(test_autodiff ${MLC_ROOT}/tests/unit/test_autodiff.c)
target_link_libraries(test_autodiff PRIVATE mlccore PkgConfig::CMOCKA)
target_compile_definitions(test_autodiff PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
add_test(NAME unit.autodiff COMMAND test_autodiff)
set_tests_properties(unit.autodiff PROPERTIES LABELS unit TIMEOUT 60)

# fused nodes and the fuse pass (ir/fused.h, passes/fuse.c)
add_executable(test_fused ${MLC_ROOT}/tests/unit/test_fused.c)
target_link_libraries(test_fused PRIVATE mlccore PkgConfig::CMOCKA)
add_test(NAME unit.fused COMMAND test_fused)
set_tests_properties(unit.fused PROPERTIES LABELS unit TIMEOUT 60)

# The gradients' numbers on the CPU target: train_entry runs a model's train
# entry and writes every output; grad_check.py compares each grad:* output
# with torch.autograd in float64, with central differences of a float64 loss,
# and with central differences of the compiled model's own loss; then the
# small MiniLLM's gradients with PyTorch fp32 autograd.
if(MLC_BACKEND_CPU)
  add_executable(train_entry ${MLC_ROOT}/tests/ref/train_entry.c ${MLC_ROOT}/driver/target_cpu.c)
  target_link_libraries(train_entry PRIVATE mlccore mlcrt mlcllvm)
  add_test(NAME ref.grad.ops
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/grad_check.py ops $<TARGET_FILE:train_entry> ${CMAKE_CURRENT_BINARY_DIR}/grad_check)
  add_test(NAME ref.grad.minillm_small
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/grad_check.py minillm $<TARGET_FILE:train_entry> ${CMAKE_CURRENT_BINARY_DIR}/grad_check
            --model ${MLC_ROOT}/examples/minillm.mdl)
  set_tests_properties(ref.grad.ops ref.grad.minillm_small PROPERTIES LABELS "ref;cpu" TIMEOUT 600)
  # FP8 (issue 30): quant byte for byte and scaled_mm against tests/ref/fp8_ref.py,
  # and a train step under precision(matmul=fp8) against numpy's recipe.
  add_test(NAME ref.fp8
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/fp8.py $<TARGET_FILE:mlc_opcheck> $<TARGET_FILE:train_entry> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/ref_fp8)
  set_tests_properties(ref.fp8 PROPERTIES LABELS "unit;cpu" TIMEOUT 300)
  # Weight sharing (head.weight = embed.weight): names, count, loss, gradients
  # and 5 AdamW steps of a tied-embedding LM against torch; loading checks.
  add_test(NAME ref.train.tied
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/tied_lm.py $<TARGET_FILE:mlc> $<TARGET_FILE:train_entry>
            ${CMAKE_CURRENT_BINARY_DIR}/tied_lm)
  set_tests_properties(ref.train.tied PROPERTIES LABELS "ref;cpu" TIMEOUT 300)
  # examples/gpt2.mdl (llm.c's GPT-2) at a small config against a PyTorch GPT:
  # state_dict names, shapes and the tie, the 124M count, logits, gradients,
  # 10 AdamW losses.
  add_test(NAME ref.gpt2
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/gpt2.py $<TARGET_FILE:mlc> $<TARGET_FILE:train_entry> ${MLC_ROOT}
            ${CMAKE_CURRENT_BINARY_DIR}/gpt2)
  set_tests_properties(ref.gpt2 PROPERTIES LABELS "ref;cpu" TIMEOUT 300)
endif()
# ---- autodiff (end) --------------------------------------------------------

# ---- profile (begin) -------------------------------------------------------
# The profiler: roofline classification and hints from synthetic timings,
# the ceilings cache, the SVG roofline, and a session's Chrome trace parsed
# back as JSON with its required fields.
if(TARGET mlcrt)
  pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
  add_executable(test_profile ${MLC_ROOT}/tests/unit/test_profile.c)
  target_link_libraries(test_profile PRIVATE mlcrt PkgConfig::CJSON PkgConfig::CMOCKA m)
  target_compile_definitions(test_profile PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
  add_test(NAME unit.profile COMMAND test_profile)
  set_tests_properties(unit.profile PROPERTIES LABELS "unit;runtime" TIMEOUT 60)
endif()
# --quantize's packing (runtime/quant.c): symmetric and asymmetric words against ones worked out by hand.
if(TARGET mlcrt)
  add_executable(test_quant ${MLC_ROOT}/tests/unit/test_quant.c)
  target_link_libraries(test_quant PRIVATE mlcrt PkgConfig::CMOCKA m)
  add_test(NAME unit.quant COMMAND test_quant)
  set_tests_properties(unit.quant PROPERTIES LABELS "unit;runtime" TIMEOUT 30)
endif()
# A real run: `mlc bench --trace --roofline` on the MLP, checked in Python.
if(MLC_BACKEND_CPU)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/profile_trace)
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME profile.trace.write
    COMMAND $<TARGET_FILE:mlc> bench ${MLC_ROOT}/examples/mlp.mdl --target cpu --runs 3 --warmup 1
            --trace ${dir}/trace.json --roofline ${dir}/roofline.svg)
  add_test(NAME profile.trace.check
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/unit/check_trace.py ${dir}/trace.json 3 ${dir}/roofline.svg)
  set_tests_properties(profile.trace.write PROPERTIES LABELS "unit;cpu" TIMEOUT 120 FIXTURES_SETUP mlc_trace)
  set_tests_properties(profile.trace.check PROPERTIES LABELS "unit;cpu" TIMEOUT 60 FIXTURES_REQUIRED mlc_trace)
  # mlc profile: the table of the train step over 3 steps (a GEMM among its
  # rows), the summary line and the time by op.
  add_test(NAME profile.cli.train_step
    COMMAND $<TARGET_FILE:mlc> profile ${MLC_ROOT}/examples/mlp.mdl --target cpu --entry train_step --steps 3)
  set_tests_properties(profile.cli.train_step PROPERTIES LABELS "unit;cpu" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "Name +Scope +Calls.*(linear|matmul)%[0-9]+ .*steps, [0-9.]+ ms per run over 3 runs.*by op \\(unit\\): [a-z_]+ \\(fp32\\) [0-9.]+ ms [0-9.]+% \\([0-9]+ steps?\\)")
  # mlc train's synthetic batch: tokens and targets spread over the 512 ids,
  # so six AdamW steps leave the loss near ln 512 = 6.24 (with only ids 0
  # and 1, as before, it is down to 3.2 by then).
  add_test(NAME cli.train.synthetic_ids
    COMMAND $<TARGET_FILE:mlc> train ${MLC_ROOT}/examples/minillm.mdl --target cpu --steps 6 ${SMALL})
  set_tests_properties(cli.train.synthetic_ids PROPERTIES LABELS "unit;cpu" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "step 1: loss 6\\.[0-9]+ .*step 6: loss 5\\.[5-9][0-9]+ ")
endif()
# ---- profile (end) ---------------------------------------------------------

# ---- memory (begin) --------------------------------------------------------
# The train step's memory plan: the optimizer inside the backward (the
# interleave pass, AdamW grouped by readiness), gradients freed at their update.
add_executable(test_memory ${MLC_ROOT}/tests/unit/test_memory.c)
target_link_libraries(test_memory PRIVATE mlccore PkgConfig::CMOCKA)
target_compile_definitions(test_memory PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
add_test(NAME unit.memory COMMAND test_memory)
set_tests_properties(unit.memory PROPERTIES LABELS unit TIMEOUT 60)
# The fp8 pass's graph on CUDA (quant_both and its views, amaxes in f32) and on the CPU (quant, transpose).
add_executable(test_fp8 ${MLC_ROOT}/tests/unit/test_fp8.c)
target_link_libraries(test_fp8 PRIVATE mlccore PkgConfig::CMOCKA)
target_compile_definitions(test_fp8 PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
add_test(NAME unit.fp8 COMMAND test_fp8)
set_tests_properties(unit.fp8 PROPERTIES LABELS unit TIMEOUT 60)
# A cmocka test that compiles models for the CPU and JIT-compiles them
# (tests/unit/test_NAME.c with the driver's CPU target): unit.NAME.
function(mlc_cpu_unit name labels timeout)
  add_executable(test_${name} ${MLC_ROOT}/tests/unit/test_${name}.c ${MLC_ROOT}/driver/target_cpu.c)
  target_link_libraries(test_${name} PRIVATE mlccore mlcrt mlcllvm PkgConfig::CMOCKA)
  target_compile_definitions(test_${name} PRIVATE MLC_SOURCE_DIR="${MLC_ROOT}")
  add_test(NAME unit.${name} COMMAND test_${name})
  set_tests_properties(unit.${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
endfunction()
if(MLC_BACKEND_CPU)
  # The plan must be true: what a CPU session holds (counted through its
  # allocator) is the planned total of --stats, within 5 %.
  mlc_cpu_unit(plan_memory "unit;cpu" 300)
  # A caller's buffers bound in place of the arena (mlc_session_bind_input,
  # bind_output) against the copying path, bit for bit, and each refusal.
  mlc_cpu_unit(bind "unit;cpu;runtime" 120)
endif()
# ---- memory (end) ----------------------------------------------------------

# No branch per target in driver/ or passes/: target names only in the registry (driver/target.c).
add_test(NAME unit.target_names COMMAND sh ${MLC_ROOT}/tests/unit/target_names.sh ${MLC_ROOT})
set_tests_properties(unit.target_names PROPERTIES LABELS unit TIMEOUT 30)

# mlc devices: every runtime driver (runtime/registry.c), the shape of each line, --target.
add_test(NAME unit.devices COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/unit/devices.py $<TARGET_FILE:mlc>)
set_tests_properties(unit.devices PROPERTIES LABELS "unit;diag" TIMEOUT 120)

# Every op of ir/ops.def on cpu, cuda, metal and spirv: a case of the op check
# (opcheck.py) that runs there, or refused by the target's supports_op with a
# message naming it (tests/unit/op_coverage.py lists the exemptions and why).
add_executable(mlc_op_support ${MLC_ROOT}/tests/unit/op_support.c)
target_link_libraries(mlc_op_support PRIVATE mlcdriver)
add_test(NAME unit.op_coverage
  COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/unit/op_coverage.py $<TARGET_FILE:mlc_op_support> ${MLC_ROOT})
set_tests_properties(unit.op_coverage PROPERTIES LABELS unit TIMEOUT 30)
