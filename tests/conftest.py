"""Shared test configuration: hypothesis profiles (``SAREK_FUZZ=1`` for the long run)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", deadline=None, max_examples=2000, suppress_health_check=list(HealthCheck)
)
settings.load_profile("fuzz" if os.environ.get("SAREK_FUZZ") else "default")


def _fast_unions() -> None:
    """typeguard checks a union by trying each member in turn, raising and formatting an
    error for each one that does not match; the IR's unions (``Expr``, ``Stmt``: twenty
    node classes) made a call's check cost up to 1 ms, most of ``make test``'s typeguard
    pass (docs/testing.md). A value that is an instance of a member that is a plain class
    passes exactly as typeguard's own check of that member would (``isinstance``); every
    other value (members that are generics, protocols, ABCs, literals, or no member at
    all) goes to typeguard's check, which reports as before."""
    from typing import Any, Union

    try:
        from typeguard import _checkers
    except ImportError:  # typeguard is a test extra
        return
    from types import UnionType

    for origin in (Union, UnionType):
        slow = _checkers.origin_type_checkers[origin]

        def check(value: Any, origin_type: Any, args: tuple[Any, ...], memo: Any,
                  slow: Any = slow) -> None:
            for member in args:
                if type(member) is type and isinstance(value, member):
                    return
            slow(value, origin_type, args, memo)

        _checkers.origin_type_checkers[origin] = check


_fast_unions()

#: generators' default samples: they check meaning over many generated cases, and run in
#: ``make test``'s second pass, without typeguard (5-30x slower under it); typeguard checks
#: the hand-written tests in the first pass (docs/testing.md)
GENERATED = frozenset({
    "test_leg18_generated_symbolic_pairs_interp", "test_leg18_generated_symbolic_pairs_opencl",
    "test_leg18_generated_pairs_interp", "test_leg18_generated_pairs_opencl",
    "test_lf10_lf11_lf18_grid", "test_off12_grid",
    "test_lch25_rows_launches_near_the_ends_generator",
    "test_leg17_generated_producers_refuse_with_a_cause",
    "test_txt26_programs_read_back_from_sexp",
    "test_leg20_generated_pairs_match_the_oracle_and_are_bitwise",
    "test_hp16_lf14_quick_sample", "test_ef12_leg10_differential_interp",
    "test_til13_offsets_near_the_ends_bitwise_on_every_backend",
    "test_lch27_generated_nd_launches_bitwise_equal", "test_ef3_let_copies_generated",
    "test_lch24_generated_pairs_decide_alike_in_both_spellings", "test_txt25_sexp_roundtrip",
    "test_lf14_pp6_differential", "test_leg14_leg15_accepted_fused_launches_are_exact_sample",
    "test_ir7_checker_agrees_with_type_of", "test_cg29_generated_kernels_bitwise_equal_on_opencl",
    "test_off11_on_opencl_bitwise", "test_lch28_generated_launch_records_run_like_direct_launches",
    "test_txt22_kernel_print_parse_roundtrip", "test_txt22_module_print_parse_roundtrip",
    "test_txt22_print_is_a_fixed_point_with_nans", "test_leg19_generated_i32_pairs_interp",
    "test_int25_generated_kernels_match_python", "test_leg1_leg7_ef12_view_pairs_sample",
    "test_ef20_generated_spellings_decide_like_global_thread_id_and_fuse_exactly",
    "test_ef22_spelled_index_equals_the_intrinsic_on_nd_launches",
    "test_leg30_generated_pairs_against_the_oracle", "test_off7_off12_eff10_sequence_sample",
    "test_lf17_pp2_pp3_off7_procedure_grid_sample",
    "test_ef3_generated_scoped_lets_differential", "test_leg12_in_place_symbolic_counts",
    "test_fe75_generated_chains_equal_the_unfused_launches",
    "test_ef31_ef34_generated_pairs_without_their_intermediate_are_exact",
    "test_fe88_generated_pipelines_twice_bitwise_interp",
    "test_fe88_generated_pipelines_twice_bitwise_opencl",
    "test_leg33_generated_3d_pairs_against_the_oracle",
    "test_lf14_lf50_polybench_bitwise_on_the_interpreter", "test_lf16_lf53_opt_on_polybench",
    "test_txt32_deep_host_program_through_every_command",
    "test_cg60_deep_kernel_emits_and_runs_bitwise",
    "test_lf50_lf52_differential_boundary_readers",
    "test_lf50_differential_2d_now_fuses_boundary_readers",
    "test_cg15_random_kernels_match_the_interpreter", "test_ef12_differential_opencl",
    "test_txt26_truncated_dumps_are_located_parse_errors",
    "test_leg8_in_place_producers_every_argument_position", "test_leg8_in_place_chains",
    "test_leg1_leg7_ef12_view_pairs_opencl", "test_cli2_mutants_of_every_example_quick_sample",
    "test_aff14_coverage_sound_against_brute_force",
    "test_lf74_hp50_generated_chains_bitwise", "test_lf74_generated_chains_on_opencl",
    "test_lf70_lf14_chains_bitwise_on_the_interpreter",
    "test_lf70_lf52_polybench_style_2d_chain_of_three",
    "test_lf70_chains_bitwise_on_opencl", "test_lf70_lf52_2d_chain_on_opencl",
    # the c backend's differential generators (tests/test_native_differential.py)
    "test_nat50_nat51_generated_kernels_bitwise_on_c",
    "test_nat50_special_float_values_bitwise_on_c", "test_nat50_unchecked_kernels_bitwise_on_c",
    "test_nat57_the_default_backend_runs_every_generated_kernel",
    "test_nat51_one_array_for_several_parameters_on_c",
    "test_nat50_break_continue_kernels_bitwise_on_c", "test_nat52_generated_nd_launches_bitwise_on_c",
    # the launch proof's soundness oracle and bitwise check (tests/test_launch_proof.py)
    "test_cg73_generated_kernels_proved_launches_never_fault",
    "test_cg73_guarded_kernels_proved_launches_never_fault",
    "test_cg73_generated_proved_launches_bitwise_on_opencl",
    # dead intermediates' generated programs (tests/test_loop_fusion_dead.py)
    "test_lf113_generated_programs_interp", "test_lf113_generated_programs_c",
})


#: hand-written sweeps run with the generators, without typeguard: each repeats the same
#: calls over many sizes or programs (every ``n`` from 0 to 8, whole PolyBench programs on
#: OpenCL, the advection peers), so typeguard checks nothing the lighter tests beside them
#: do not (each file keeps one test of the same rules under typeguard: docs/testing.md)
SWEEPS = frozenset({
    # tests/test_loop_fusion_boundary.py (test_lf50_jacobi_boundary_read_at_two_sizes stays)
    "test_lf50_consumer_domain_disjoint_from_the_producer", "test_lf50_guarded_producers",
    "test_lf50_two_dimensional_edges", "test_lf52_subscript_through_a_let_keeps_the_selects",
    "test_lf52_inner_loop_subscript_and_length_bounds", "test_lf50_on_opencl",
    "test_lf50_two_intermediates_only_one_at_the_edge",
    # tests/test_polybench_stencils.py (test_lf50_polybench_pairs_as_published stays)
    "test_lf14_lf50_polybench_bitwise_on_opencl",
    # tests/test_peers_benchmark.py: the benchmark script's peers against sarek_py's fields
    "test_cli24_numpy_advection_is_bitwise_sarek_py", "test_cli24_numba_advection_is_bitwise_sarek_py",
    "test_cli24_a_reassociated_peer_is_caught", "test_cli24_missing_peers_are_skipped_with_a_line",
    # deep or repeated programs: test_inline_diff.py, test_adversarial_epilogue_lets.py,
    # test_adversarial_effects.py (each file's other tests cover the same rules)
    "test_inl11_interpreter_bitwise", "test_ef3_deep_chain_of_copies_fuses_without_recursion_error",
    "test_leg8_in_place_pairs_bitwise_on_opencl",
    "test_pp2_other_statement_names_dummy_passed_as_renamed_array",
    "test_pp3_consumer_bounds_read_dummy_the_loop_writes_as_another",
    # random or enumerated cases checked against an oracle (each file's hand-written
    # tests of the same rules stay under typeguard)
    "test_int21_vectorised_equals_thread_by_thread", "test_aff16_soundness_random_systems",
    "test_cg27_ranges_of_division_by_a_variable_contain_every_value",
    "test_cg18_ranges_contain_every_value", "test_aff3_aff6_aff7_agree_with_evaluation",
    "test_aff14_random_two_symbols_sound", "test_cg22_random_kernels_fault_like_the_interpreter",
    "test_leg2_conditions_are_exact_sets", "test_fe7_random_float_expressions",
    # tests/test_corpus.py: every corpus scenario and pair (the file's other tests, the
    # refusal and listing ones, stay under typeguard)
    "test_corpus_interp_matches_reference", "test_corpus_fused_pairs_bitwise",
    "test_corpus_illegal_pairs_never_fuse",
    # the c backend on whole programs and the benchmark's rows (tests/test_native_*.py
    # keep their kernel-level tests under typeguard), the cost model's sweep sample
    "test_nat53_polybench_programs_offloaded_on_c", "test_nat53_fused_corpus_pairs_on_c",
    "test_nat53_example_programs_offloaded_on_c", "test_nat55_opencl_and_c_rows_in_one_run",
    "test_nat55_the_numpy_peer_is_bitwise_the_c_field",
    "test_nat39_advection_fused_swap_on_c_is_the_unfused_run",
    "test_nat66_random_guards_are_bitwise", "test_nat66_random_nd_guards_are_bitwise",
    "test_lf68_sweep_pairs_fuse_and_stay_bitwise",
    # tests/test_loop_fusion_split.py: PolyBench at every size and backend, every n of the
    # accumulating consumer and of the chain of three, the benchmark's run (the file keeps
    # test_lf85_polybench_split_into_loops, the 2-D edges on OpenCL, the transposed and
    # diagonal reads and the chain on OpenCL under typeguard)
    "test_lf85_polybench_bitwise_offloaded",
    "test_lf90_polybench_benchmark_runs_both_forms", "test_lf89_chain_of_three_bitwise_every_size",
    "test_lf85_lf86_not_idempotent_consumer_every_size",
    "test_lf85_guarded_producer_bounds_of_one_index",
    "test_lf85_2d_edges_one_sided_and_wider_consumer",
    # five programs nested ~1000 deep through five commands each (tests/test_bad_input_hand.py
    # keeps test_txt32_nesting_past_the_bounds_is_located under typeguard)
    "test_txt32_deep_nesting_within_the_bounds_works",
    "test_lf86_generated_boundary_readers_adding_to_what_they_write",
    # the calibration's fits over a grid of candidate rows (tests/test_cost_roofline.py keeps
    # its model tests under typeguard)
    "test_lf77_fit_of_a_linear_machine_and_the_misfits", "test_lf77_fit_recovers_a_roofline",
    # whole chains through opt twice, in procedures, with notes (tests/test_loop_fusion_chains.py
    # keeps test_lf70_whole_chain_fuses_in_one_run and the others under typeguard); every n
    # of jacobi's boundary pair (test_lf50_jacobi_boundary_read_at_two_sizes stays)
    "test_lf72_second_run_is_a_noop_with_a_note", "test_lf70_lf17_chain_in_a_procedure",
    "test_lf73_opt_notes_for_a_chain_and_its_rerun", "test_lf50_jacobi_boundary_read_as_stored",
    # a long grid-stride loop, deep lazy operands (each file's other tests of the same rules
    # stay under typeguard)
    "test_leg23_long_loop_storing_only_where_the_consumer_does_not_act_fuses",
    "test_cg61_deep_lazy_operands_are_a_located_compiler_refusal",
    "test_hp51_hp52_generated_expressions_match_the_tree_walk",
})


def pytest_collection_modifyitems(config: object, items: list[object]) -> None:
    """Mark the generators' default samples and the sweeps ``generated`` (see
    :data:`GENERATED`, :data:`SWEEPS`)."""
    import pytest

    for item in items:
        if getattr(item, "originalname", None) in GENERATED | SWEEPS:
            item.add_marker(pytest.mark.generated)  # type: ignore[attr-defined]
