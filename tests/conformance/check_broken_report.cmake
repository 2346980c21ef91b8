# cmake -DCONFORMANCE=<trainyard-conformance> -DLIBRARY=<libfixture_broken_conformance.so> -P ...
#
# Runs the suite on the broken fixture (tests/fixtures/broken_conformance_plugin.cc) and checks
# that it fails, that exactly the checks each class breaks are reported failed while the ones
# it keeps pass, and that the report says what was expected and found.
execute_process(COMMAND ${CONFORMANCE} ${LIBRARY} OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE status)
set(report "${out}${err}")

set(problems "")
if(status EQUAL 0)
  string(APPEND problems "the suite exited 0 on the broken fixture\n")
endif()

set(must_fail
  "Backend/broken.Forward/tanh"
  "Backend/broken.Forward/exp"
  "Backend/broken.Deterministic/exp"
  "Model/DisconnectedModel.GradientForEveryTrainableVariable"
  "Loss/HalfGradientLoss.GradientCheck"
  "Optimizer/AscentOptimizer.ConvergesOnQuadratic"
  "Reader/SloppyReader.DeclaredFeaturesMatchRecord"
  "Reader/SloppyReader.CorruptInputGivesCleanError")
set(must_pass
  "Backend/broken.MemoryRoundTrip"
  "Backend/broken.NativeAccessors"
  "Backend/broken.Forward/add"
  "Backend/broken.Forward/matmul"
  "Backend/broken.Deterministic/tanh"
  "Model/DisconnectedModel.OutputShapes"
  "Model/DisconnectedModel.OverfitsTinyBatch"
  "Model/DisconnectedModel.CheckpointRoundTrip"
  "Loss/HalfGradientLoss.KnownValues"
  "Loss/HalfGradientLoss.ShapeChecks"
  "Optimizer/AscentOptimizer.SlotsSavedAndRestored"
  "Optimizer/AscentOptimizer.UndefinedGradientChangesNothing")
# What the report must say: which variable, which values, a repro line, the crash.
set(must_say
  "trainable variable 'forgotten/weights'[^\n]*gets no gradient from the label loss"
  "forward of tanh on broken differs from the reference \\(case tanh\\)"
  "element 0: got [-0-9.e]+, expected [-0-9.e]+"
  "repro: trainyard-conformance [^\n]* --seed=1701 --gtest_filter='Backend/broken.Forward/tanh'  # device broken, op tanh, case tanh, inputs f32\\[3, 5\\], case seed [0-9]+"
  "exp on broken is not deterministic: two runs on the same inputs differ"
  "HalfGradientLoss: the gradient that autodiff gives for the predictions differs from central differences"
  "input 0 element 0 \\(x = [-0-9.e]+\\): analytic [-0-9.e]+, numeric [-0-9.e]+"
  "AscentOptimizer does not minimize 1/2 sum a \\(x - t\\)\\^2"
  "learning rate 0.1: loss [^\n]* after [0-9]+ steps"
  "feature 'features' has shape \\[5\\], declared \\[4\\]"
  "given 300 random bytes should throw a trainyard::Error naming the record; it threw an exception that is not a trainyard::Error: bad record"
  "given an empty record \\(no features at all\\) should throw a trainyard::Error naming the record; it crashed with signal 6")

foreach(name IN LISTS must_fail)
  string(REGEX REPLACE "([.+*?()\\[\\]])" "\\\\\\1" pattern "${name}")
  if(NOT report MATCHES "\\[  FAILED  \\] ${pattern}[ \n]")
    string(APPEND problems "expected check ${name} to fail\n")
  endif()
endforeach()
foreach(name IN LISTS must_pass)
  string(REGEX REPLACE "([.+*?()\\[\\]])" "\\\\\\1" pattern "${name}")
  if(NOT report MATCHES "\\[       OK \\] ${pattern} ")
    string(APPEND problems "expected check ${name} to pass\n")
  endif()
endforeach()
foreach(pattern IN LISTS must_say)
  if(NOT report MATCHES "${pattern}")
    string(APPEND problems "the report does not say: ${pattern}\n")
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "${problems}\n--- the suite's report (exit status ${status}) ---\n${report}")
endif()
message(STATUS "the broken fixture fails the conformance suite as expected")
