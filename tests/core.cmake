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
mlc_golden(mlp.ir            mlp.ir            compile examples/mlp.mdl --emit ir)
mlc_golden(linear.ir         linear.ir         compile examples/linear.mdl --emit ir)
mlc_golden(print_after_all   mlp.print_after   compile examples/mlp.mdl --print-after=all)
mlc_golden(help              help.txt          --help)

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
  add_test(NAME ref.run.errors
    COMMAND ${MLC_PYTHON} ${MLC_ROOT}/tests/ref/run_errors.py $<TARGET_FILE:mlc> ${MLC_ROOT} ${CMAKE_CURRENT_BINARY_DIR}/run_errors)
  set_tests_properties(ref.run.minillm_small ref.app.mlp ref.run.errors PROPERTIES LABELS "ref;cpu" TIMEOUT 300)
endif()
