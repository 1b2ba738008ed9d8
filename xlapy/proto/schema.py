"""XLA's protobuf messages for HLO, declared in Python: no .proto file, no protoc.

Owns: the message and enum declarations (names and field numbers of XLA's
``xla/xla_data.proto``, ``xla/service/hlo.proto`` and ``xla/xla.proto``, for the messages an
HLO module, an HloProto dump, an HloSnapshot and an HloModuleProtoWithConfig carry), the
compact table syntax they are written in, and ``message_class(name)``: the generated
protobuf class of ``xla.<name>``, built once from a FileDescriptorProto made here and added
to a private DescriptorPool (so nothing clashes with another copy of XLA's protos a program
may have loaded).

Table syntax, one field per line: ``<number> <name> [repeated] <type> [oneof=<group>]``.
A type is a scalar (int64, int32, uint64, uint32, bool, string, bytes, float, double), an
enum or message of this table (nested ones written ``Outer.Inner``), or ``map<K,V>``.
Messages whose fields xlapy does not interpret but a dump may hold (buffer assignments,
profiles, device assignments) are declared too, so a file is read without unknown fields
and its text form parses; ``DebugOptions`` (hundreds of flags) stays opaque bytes.
Imports only the protobuf package.
"""

from __future__ import annotations

from functools import cache

# -- enums ---------------------------------------------------------------------------------------

_ENUMS: dict[str, str] = {
    "PrimitiveType": """
        PRIMITIVE_TYPE_INVALID 0  PRED 1  S1 30  S2 26  S4 21  S8 2  S16 3  S32 4  S64 5
        U1 31  U2 27  U4 22  U8 6  U16 7  U32 8  U64 9  F16 10  F32 11  BF16 16  F64 12
        F8E5M2 19  F8E4M3 28  F8E4M3FN 20  F8E4M3B11FNUZ 23  F8E3M4 29  F8E5M2FNUZ 24
        F8E4M3FNUZ 25  F4E2M1FN 32  F8E8M0FNU 33  F6E3M2FN 35  F6E2M3FN 36  C64 15  C128 18
        TUPLE 13  OPAQUE_TYPE 14  TOKEN 17  BUFFER 34""",
    "DimLevelType": "DIM_DENSE 0  DIM_COMPRESSED 1  DIM_SINGLETON 2  DIM_LOOSE_COMPRESSED 3",
    "PaddingType": "PADDING_INVALID 0  PADDING_VALID 1  PADDING_SAME 2",
    "FftType": "FFT 0  IFFT 1  RFFT 2  IRFFT 3",
    "RandomDistribution": "RNG_INVALID 0  RNG_UNIFORM 1  RNG_NORMAL 2",
    "RandomAlgorithm": "RNG_DEFAULT 0  RNG_THREE_FRY 1  RNG_PHILOX 2",
    "ProfileType": "INVALID 0  WINDOW 1  FLAG 2  INTEGER 3",
    "ProfileSource": """PROFILE_SOURCE_UNKNOWN_SOURCE 0  PROFILE_SOURCE_EMBEDDED 1
        PROFILE_SOURCE_REMOTE 2""",
    "CompilationEvent": """COMPILATION_EVENT_UNKNOWN_EVENT 0
        COMPILATION_EVENT_FIRST_COMPILATION 1  COMPILATION_EVENT_RECOMPILATION 2""",
    "ProfileGenerationStrategy": """PROFILE_GENERATION_STRATEGY_UNKNOWN 0
        PROFILE_GENERATION_STRATEGY_GA 1  PROFILE_GENERATION_STRATEGY_FANTA 2
        PROFILE_GENERATION_STRATEGY_CFO 3  PROFILE_GENERATION_STRATEGY_EXHAUSTIVE 4
        PROFILE_GENERATION_STRATEGY_LCM_GNN 5  PROFILE_GENERATION_STRATEGY_LCM_MOE 6""",
    "TriangularSolveOptions.Transpose": """TRANSPOSE_INVALID 0  NO_TRANSPOSE 1  TRANSPOSE 2
        ADJOINT 3""",
    "OpSharding.Type": """REPLICATED 0  MAXIMAL 1  TUPLE 2  OTHER 3  MANUAL 4  UNKNOWN 5
        UNREDUCED 6""",
    "OpSharding.ShardGroupType": "AS 0  LIKE 1",
    "ResultAccuracy.Mode": "DEFAULT 0  HIGHEST 1",
    "PrecisionConfig.Precision": "DEFAULT 0  HIGH 1  HIGHEST 2  PACKED_NIBBLE 3",
    "PrecisionConfig.Algorithm": """ALG_UNSET 0  ALG_DOT_ANY_F8_ANY_F8_F32 1
        ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM 2  ALG_DOT_F16_F16_F16 3  ALG_DOT_F16_F16_F32 4
        ALG_DOT_BF16_BF16_BF16 5  ALG_DOT_BF16_BF16_F32 6  ALG_DOT_BF16_BF16_F32_X3 7
        ALG_DOT_BF16_BF16_F32_X6 8  ALG_DOT_TF32_TF32_F32 9  ALG_DOT_TF32_TF32_F32_X3 10
        ALG_DOT_F32_F32_F32 11  ALG_DOT_F64_F64_F64 12  ALG_DOT_BF16_BF16_F32_X9 13""",
    # Fields 92-98 of HloInstructionProto and 20 of HloModuleProto are newer than the
    # hlo.proto read for this table: their numbers and encodings are the ones jaxlib 0.10.2's
    # XLA writes (found by serializing modules with it); their names are xlapy's.
    "TriState": "TRI_STATE_UNSET 0  TRI_STATE_TRUE 1  TRI_STATE_FALSE 2",
    "ConvolutionKind": "CONVOLUTION_KIND_UNSET 0  FPROP 1  DGRAD 2  WGRAD 3",
    # xla/service/hlo.proto
    "CustomCallSchedule": "SCHEDULE_NONE 0  SCHEDULE_LATEST 1  SCHEDULE_EARLIEST 2",
    "CustomCallApiVersion": """API_VERSION_UNSPECIFIED 0  API_VERSION_ORIGINAL 1
        API_VERSION_STATUS_RETURNING 2  API_VERSION_STATUS_RETURNING_UNIFIED 3
        API_VERSION_TYPED_FFI 4""",
    "Kind": "UNDEFINED_ALIAS 0  MAY_ALIAS 1  MUST_ALIAS 2",
    "HloModuleProto.ProfileType": """INVALID 0  FLAG 1  FUSION 2  LAYOUT 3  DOT 4  FLAGNET 5
        SHARDING 6""",
    "HloModuleProto.ProfileGenerationStrategy": """PROFILE_GENERATION_STRATEGY_UNKNOWN 0
        PROFILE_GENERATION_STRATEGY_GA 1  PROFILE_GENERATION_STRATEGY_FANTA 2
        PROFILE_GENERATION_STRATEGY_CFO 3""",
    "HeapSimulatorTrace.Event.Kind": "ALLOC 0  FREE 1  SHARE_WITH 2",
    # xla/xla.proto
    "HloModuleConfigProto.FusionConfigCollection": "OFF 0  PER_EDGE 1  PER_NODE 2",
}

# -- messages ------------------------------------------------------------------------------------

_MESSAGES: dict[str, str] = {
    # xla/xla_data.proto
    "PaddingConfig": "1 dimensions repeated PaddingConfig.PaddingConfigDimension",
    "PaddingConfig.PaddingConfigDimension": """
        1 edge_padding_low int64
        2 edge_padding_high int64
        3 interior_padding int64""",
    "TileProto": "1 dimensions repeated int64",
    "SplitConfigProto": """
        1 dimension int64
        2 split_indices repeated int64""",
    "LayoutProto": """
        1 minor_to_major repeated int64
        9 dim_level_types repeated DimLevelType
        13 dim_unique repeated bool
        14 dim_ordered repeated bool
        6 tiles repeated TileProto
        16 tail_padding_alignment_in_elements int64
        7 element_size_in_bits int64
        8 memory_space int64
        11 index_primitive_type PrimitiveType
        12 pointer_primitive_type PrimitiveType
        10 physical_shape ShapeProto
        15 dynamic_shape_metadata_prefix_bytes int64
        17 split_configs repeated SplitConfigProto""",
    "ShapeProto": """
        2 element_type PrimitiveType
        3 dimensions repeated int64
        6 is_dynamic_dimension repeated bool
        4 tuple_shapes repeated ShapeProto
        5 layout LayoutProto""",
    "ProgramShapeProto": """
        1 parameters repeated ShapeProto
        2 result ShapeProto
        3 parameter_names repeated string""",
    "OpMetadata": """
        1 op_type string
        2 op_name string
        3 source_file string
        4 source_line int32
        17 source_end_line int32
        18 source_column int32
        19 source_end_column int32
        5 profile_type repeated ProfileType
        8 size_of_generated_code_in_bytes int64
        9 size_of_memory_working_set_in_bytes int64
        10 profile_info OpMetadata.ProfileInfo
        12 deduplicated_name string
        15 stack_frame_id int32
        16 scheduling_name string
        20 metadata_payload OpMetadata.PayloadRef""",
    # metadata_payload: an index into HloModuleProto.metadata_payloads (jaxlib 0.10.2's XLA
    # writes the text's payloads once per module, the instructions' metadata refer to them).
    "OpMetadata.PayloadRef": "2 index int64",
    "OpMetadata.ProfileInfo": """
        1 profile_type repeated ProfileType
        2 relative_speedup double
        3 profile_source ProfileSource
        4 compilation_event CompilationEvent
        5 profile_generation_strategy ProfileGenerationStrategy""",
    "DeviceAssignmentProto": """
        1 replica_count int32
        2 computation_count int32
        3 computation_devices repeated DeviceAssignmentProto.ComputationDevice""",
    "DeviceAssignmentProto.ComputationDevice": "1 replica_device_ids repeated int64",
    "LiteralProto": """
        1 shape ShapeProto
        2 preds repeated bool
        30 s1s bytes
        26 s2s bytes
        21 s4s bytes
        15 s8s bytes
        31 u1s bytes
        27 u2s bytes
        22 u4s bytes
        3 u8s bytes
        4 s32s repeated int32
        5 s64s repeated int64
        6 u32s repeated uint32
        7 u64s repeated uint64
        8 f32s repeated float
        9 f64s repeated double
        12 c64s repeated float
        18 c128s repeated double
        10 tuple_literals repeated LiteralProto
        11 f16s bytes
        13 bf16s bytes
        16 u16s bytes
        17 s16s bytes
        32 f4e2m1fns bytes
        29 f8e3m4s bytes
        23 f8e4m3b11fnuzs bytes
        20 f8e4m3fns bytes
        25 f8e4m3fnuzs bytes
        28 f8e4m3s bytes
        24 f8e5m2fnuzs bytes
        19 f8e5m2s bytes
        33 f8e8m0fnus bytes
        14 sparse_indices repeated int64""",
    "WindowDimension": """
        1 size int64
        2 stride int64
        3 padding_low int64
        4 padding_high int64
        5 window_dilation int64
        6 base_dilation int64
        7 window_reversal bool""",
    "Window": "1 dimensions repeated WindowDimension",
    "GatherDimensionNumbers": """
        1 offset_dims repeated int64
        2 collapsed_slice_dims repeated int64
        3 start_index_map repeated int64
        4 index_vector_dim int64
        5 operand_batching_dims repeated int64
        6 start_indices_batching_dims repeated int64""",
    "ScatterDimensionNumbers": """
        1 update_window_dims repeated int64
        2 inserted_window_dims repeated int64
        3 scatter_dims_to_operand_dims repeated int64
        4 index_vector_dim int64
        5 input_batching_dims repeated int64
        6 scatter_indices_batching_dims repeated int64""",
    "ConvolutionDimensionNumbers": """
        7 input_batch_dimension int64
        8 input_feature_dimension int64
        11 input_spatial_dimensions repeated int64
        3 kernel_input_feature_dimension int64
        4 kernel_output_feature_dimension int64
        6 kernel_spatial_dimensions repeated int64
        9 output_batch_dimension int64
        10 output_feature_dimension int64
        12 output_spatial_dimensions repeated int64""",
    "DotDimensionNumbers": """
        1 lhs_contracting_dimensions repeated int64
        2 rhs_contracting_dimensions repeated int64
        3 lhs_batch_dimensions repeated int64
        4 rhs_batch_dimensions repeated int64""",
    "RaggedDotDimensionNumbers": """
        1 dot_dimension_numbers DotDimensionNumbers
        2 lhs_ragged_dimensions repeated int64
        3 rhs_group_dimensions repeated int64""",
    "TriangularSolveOptions": """
        1 left_side bool
        2 lower bool
        3 unit_diagonal bool
        4 transpose_a TriangularSolveOptions.Transpose""",
    "CholeskyOptions": "1 lower bool",
    "FrontendAttributes": "1 map map<string,string>",
    "Statistic": """
        1 stat_name string
        2 stat_val double""",
    "StatisticsViz": """
        1 stat_index_to_visualize int64
        2 statistics repeated Statistic""",
    "MeshProto": """
        1 axes repeated MeshProto.MeshAxis
        2 device_ids repeated int64""",
    "MeshProto.MeshAxis": """
        1 name string
        2 size int64""",
    "AxisRefProto": """
        1 mesh_axis_index int64
        2 sub_axis_info AxisRefProto.SubAxis""",
    "AxisRefProto.SubAxis": """
        1 pre_size int64
        2 size int64""",
    "NamedShardingProto": """
        1 tuple_shardings repeated NamedShardingProto
        2 mesh MeshProto
        3 dim_shardings repeated NamedShardingProto.DimensionSharding
        4 replicated_axes repeated AxisRefProto
        5 unreduced_axes repeated AxisRefProto
        6 metadata repeated OpMetadata""",
    "NamedShardingProto.DimensionSharding": """
        1 axes repeated AxisRefProto
        2 is_closed bool""",
    "OpSharding": """
        1 type OpSharding.Type
        2 tile_shape ShapeProto
        3 tile_assignment_dimensions repeated int64
        4 tile_assignment_devices repeated int64
        5 tuple_shardings repeated OpSharding
        6 replicate_on_last_tile_dim bool
        7 metadata repeated OpMetadata
        8 last_tile_dims repeated OpSharding.Type
        9 iota_reshape_dims repeated int64
        10 iota_transpose_perm repeated int32
        11 is_shard_group bool
        12 shard_group_id int64
        13 shard_group_type OpSharding.ShardGroupType
        14 named_sharding NamedShardingProto""",
    "ReplicaGroup": "1 replica_ids repeated int64",
    "IotaReplicaGroupListProto": """
        1 num_replica_groups int64
        2 num_devices_per_group int64
        3 iota_reshape_dims repeated int64
        4 iota_transpose_perm repeated int32""",
    "CollectiveDeviceListProto": """
        1 replica_groups repeated ReplicaGroup
        2 iota_replica_group_list IotaReplicaGroupListProto""",
    "SourceTarget": """
        1 source int64
        2 target int64""",
    "ResultAccuracy": """
        1 mode ResultAccuracy.Mode oneof=specs
        2 tolerance ResultAccuracy.Tolerance oneof=specs""",
    "ResultAccuracy.Tolerance": """
        1 atol double
        2 rtol double
        3 ulps int64""",
    "PrecisionConfig": """
        1 operand_precision repeated PrecisionConfig.Precision
        2 algorithm PrecisionConfig.Algorithm""",
    "ParameterReplication": "1 replicated_at_leaf_buffers repeated bool",
    "OutputOperandAliasing": """
        1 output_shape_index repeated int64
        2 operand_index int64
        3 operand_shape_index repeated int64""",
    "OriginalArrayProto": """
        1 instruction_name string
        2 shape_index repeated int64""",
    "OriginalValueElementProto": """
        1 shape_index repeated int64
        2 original_array OriginalArrayProto""",
    "OriginalValueProto": """
        1 elements repeated OriginalValueElementProto
        2 is_synthetic_call bool""",
    # xla/service/hlo.proto
    "HloInstructionProto": """
        1 name string
        2 opcode string
        3 shape ShapeProto
        7 metadata OpMetadata
        8 literal LiteralProto
        9 parameter_number int64
        11 fusion_kind string
        13 tuple_index int64
        14 dimensions repeated int64
        15 window Window
        16 convolution_dimension_numbers ConvolutionDimensionNumbers
        50 feature_group_count int64
        58 batch_group_count int64
        17 slice_dimensions repeated HloInstructionProto.SliceDimensions
        18 exponent_bits int32
        19 mantissa_bits int32
        20 dynamic_slice_sizes repeated int64
        21 padding_config PaddingConfig
        22 outfeed_config bytes
        23 distribution RandomDistribution
        24 epsilon float
        25 feature_index int64
        26 channel_id int64
        27 infeed_config bytes
        28 custom_call_target string
        29 outfeed_shape ShapeProto
        30 dot_dimension_numbers DotDimensionNumbers
        90 ragged_dot_dimension_numbers RaggedDotDimensionNumbers
        31 fft_type FftType
        32 fft_length repeated int64
        63 comparison_direction string
        33 gather_dimension_numbers GatherDimensionNumbers
        34 gather_slice_sizes repeated int64
        35 id int64
        36 operand_ids repeated int64
        37 control_predecessor_ids repeated int64
        38 called_computation_ids repeated int64
        40 sharding OpSharding
        43 backend_config bytes
        49 replica_groups repeated ReplicaGroup
        45 all_reduce_id int64
        71 use_global_device_ids bool
        47 is_host_transfer bool
        60 is_stable bool
        48 scatter_dimension_numbers ScatterDimensionNumbers
        51 precision_config PrecisionConfig
        52 source_target_pairs repeated SourceTarget
        54 domain_entry_sharding OpSharding
        55 domain_exit_sharding OpSharding
        56 constrain_layout bool
        57 operand_shapes_with_layout repeated ShapeProto
        59 triangular_solve_options TriangularSolveOptions
        62 cholesky_options CholeskyOptions
        61 parameter_replication ParameterReplication
        65 custom_call_has_side_effect bool
        74 output_operand_aliasing repeated OutputOperandAliasing
        76 custom_call_schedule CustomCallSchedule
        66 delta int64
        67 indices_are_sorted bool
        68 frontend_attributes FrontendAttributes
        69 unique_indices bool
        70 rng_algorithm RandomAlgorithm
        72 comparison_type string
        73 is_cross_program_prefetch bool
        80 cross_program_prefetch_index int32 oneof=optional_cross_program_prefetch_index
        75 padding_type PaddingType
        77 custom_call_api_version CustomCallApiVersion
        79 async_execution_thread string
        81 k int64
        85 largest bool
        82 statistics_viz StatisticsViz
        87 collective_device_list CollectiveDeviceListProto
        88 original_value OriginalValueProto
        89 is_composite bool
        91 result_accuracy ResultAccuracy
        92 iota_collective_device_list IotaReplicaGroupListProto
        94 is_reverse bool
        95 num_carries int64
        96 is_associative TriState
        97 convolution_kind ConvolutionKind
        98 convolution_field_98 bytes""",
    "HloInstructionProto.SliceDimensions": """
        1 start int64
        2 limit int64
        3 stride int64""",
    "HloComputationProto": """
        1 name string
        2 instructions repeated HloInstructionProto
        4 program_shape ProgramShapeProto
        5 id int64
        6 root_id int64
        7 is_fusion_computation bool
        8 execution_thread string""",
    "HloScheduleProto": "1 sequences map<int64,HloScheduleProto.InstructionSequence>",
    "HloScheduleProto.InstructionSequence": "1 instruction_ids repeated int64",
    "HloInputOutputAliasProto": "1 entries repeated HloInputOutputAliasProto.AliasEntryProto",
    "HloInputOutputAliasProto.AliasEntryProto": """
        1 output_shape_index repeated int64
        2 parameter_number int64
        3 parameter_shape_index repeated int64
        4 kind Kind""",
    "HloBufferDonorProto": "1 entries repeated HloBufferDonorProto.BufferDonorEntryProto",
    "HloBufferDonorProto.BufferDonorEntryProto": """
        1 parameter_number int64
        2 parameter_shape_index repeated int64""",
    "CrossProgramPrefetch": """
        1 parameter int64
        2 index repeated int64
        3 offset int64""",
    "StackFrameIndexProto": """
        1 file_names repeated string
        2 function_names repeated string
        3 file_locations repeated StackFrameIndexProto.FileLocation
        4 stack_frames repeated StackFrameIndexProto.StackFrame""",
    # end_line and end_column: numbers as XLA 0.10.2 (jaxlib) writes them.
    "StackFrameIndexProto.FileLocation": """
        1 file_name_id int32
        2 function_name_id int32
        3 line int32
        4 column int32
        5 end_line int32
        6 end_column int32""",
    "StackFrameIndexProto.StackFrame": """
        1 file_location_id int32
        2 parent_frame_id int32""",
    "HloModuleProto": """
        1 name string
        2 entry_computation_name string
        6 entry_computation_id int64
        3 computations repeated HloComputationProto
        4 host_program_shape ProgramShapeProto
        5 id int64
        7 schedule HloScheduleProto
        8 input_output_alias HloInputOutputAliasProto
        18 buffer_donor HloBufferDonorProto
        10 cross_program_prefetches repeated CrossProgramPrefetch
        11 is_dynamic bool
        12 spmd_output_sharding OpSharding
        14 spmd_parameters_shardings repeated OpSharding
        16 use_auto_spmd_partitioning bool
        13 profile_info repeated HloModuleProto.ProfileInfo
        15 device_assignment DeviceAssignmentProto
        17 stack_frame_index StackFrameIndexProto
        19 frontend_attributes FrontendAttributes
        20 origin_recovery_table bytes
        22 metadata_payloads repeated bytes""",
    "HloModuleProto.ProfileInfo": """
        1 profile_type HloModuleProto.ProfileType
        2 relative_speedup double
        3 profile_source ProfileSource
        4 compilation_event CompilationEvent
        5 fingerprint string
        6 profile_generation_strategy HloModuleProto.ProfileGenerationStrategy""",
    "LogicalBufferProto": """
        1 id int64
        2 size int64
        3 defined_at LogicalBufferProto.Location
        4 color int64""",
    "LogicalBufferProto.Location": """
        2 instruction_name string
        4 instruction_id int64
        3 shape_index repeated int64""",
    "BufferAllocationProto": """
        1 index int64
        2 size int64
        3 is_thread_local bool
        11 is_tuple bool
        5 is_entry_computation_parameter bool
        12 is_constant bool
        6 parameter_number int64
        10 parameter_shape_index repeated int64
        7 maybe_live_out bool
        8 color int64
        9 assigned repeated BufferAllocationProto.Assigned""",
    "BufferAllocationProto.Assigned": """
        1 logical_buffer_id int64
        2 offset int64
        3 size int64""",
    "HeapSimulatorTrace": """
        1 events repeated HeapSimulatorTrace.Event
        2 whole_module_simulation bool
        3 buffer_allocation_index int64""",
    "HeapSimulatorTrace.Event": """
        1 kind HeapSimulatorTrace.Event.Kind
        2 buffer_id int64
        3 computation_name string
        4 instruction_name string
        5 share_with_canonical_id int64""",
    "BufferAssignmentProto": """
        1 logical_buffers repeated LogicalBufferProto
        2 buffer_aliases repeated BufferAssignmentProto.BufferAlias
        3 buffer_allocations repeated BufferAllocationProto
        4 heap_simulator_traces repeated HeapSimulatorTrace""",
    "BufferAssignmentProto.BufferAlias": """
        1 source_buffer_id int64
        2 location LogicalBufferProto.Location""",
    "HloProto": """
        1 hlo_module HloModuleProto
        3 buffer_assignment BufferAssignmentProto""",
    "HloSnapshot": """
        1 hlo HloProto
        2 arguments repeated LiteralProto
        3 result LiteralProto
        4 execution_platform string""",
    "HloInputs": """
        1 arguments repeated LiteralProto
        2 arguments_descriptors repeated HloInputs.ArgumentDescriptor""",
    # jaxlib 0.10.2's XLA writes an unoptimized snapshot's arguments after the message: per
    # argument a descriptor here (its size in bytes) and, after the (length-delimited)
    # message, a little-endian uint64 ShapeProto size, the ShapeProto and the raw data.
    "HloInputs.ArgumentDescriptor": "2 size int64",
    "HloUnoptimizedSnapshot": """
        1 hlo_module HloModuleProto
        2 partitions repeated HloInputs""",
    # xla/xla.proto
    "ShardableValueUpdatePairProto": """
        1 input_parameter_number int64
        2 parameter_shape_index repeated int64
        3 output_shape_index repeated int64""",
    "HloModuleConfigProto": """
        1 entry_computation_layout ProgramShapeProto
        2 seed uint64
        3 launch_id int32
        4 replica_count int64
        5 num_partitions int64
        6 param_requires_broadcast_via_collectives repeated bool
        7 use_spmd_partitioning bool
        8 use_auto_spmd_partitioning bool
        9 auto_spmd_partitioning_mesh_shape repeated int64
        10 auto_spmd_partitioning_mesh_ids repeated int64
        36 exec_time_optimization_effort float
        37 memory_fitting_effort float
        11 deduplicate_hlo bool
        12 intra_op_parallelism_threads int64
        13 device_type string
        14 debug_options bytes
        15 static_device_assignment DeviceAssignmentProto
        35 pre_simulation_device_assignment DeviceAssignmentProto
        30 allow_separate_sharding_programs bool
        16 shardable_value_update_pairs repeated ShardableValueUpdatePairProto
        17 alias_passthrough_params bool
        18 content_aware_computation_sorting bool
        19 fusion_config_collection HloModuleConfigProto.FusionConfigCollection
        20 fusion_config repeated HloModuleConfigProto.BoolList
        21 dot_config map<string,HloModuleConfigProto.Int64List>
        22 layout_config repeated HloModuleConfigProto.Int64ListList
        23 memory_space_assignment_config repeated uint64
        24 phase_ordering_config repeated HloModuleConfigProto.BoolList
        25 phase_index int32
        33 allow_spmd_sharding_propagation_to_parameters repeated bool
        27 allow_spmd_sharding_propagation_to_output repeated bool
        28 analysis_allowance_map map<string,int64>
        29 matrix_unit_operand_precision PrecisionConfig.Precision
        31 fdo_profile bytes
        32 device_memory_size int64
        34 use_shardy_partitioner bool""",
    "HloModuleConfigProto.BoolList": "1 vals repeated bool",
    "HloModuleConfigProto.Int64List": "1 vals repeated int64",
    "HloModuleConfigProto.Int64ListList": "1 lists repeated HloModuleConfigProto.Int64List",
    "HloModuleProtoWithConfig": """
        1 hlo_module HloModuleProto
        2 config HloModuleConfigProto""",
}

_PACKAGE = "xla"
_FILE_NAME = "xlapy/proto/xla_hlo_schema.proto"


def _scalar_types():
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    return {
        "int64": F.TYPE_INT64, "int32": F.TYPE_INT32, "uint64": F.TYPE_UINT64,
        "uint32": F.TYPE_UINT32, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
        "bytes": F.TYPE_BYTES, "float": F.TYPE_FLOAT, "double": F.TYPE_DOUBLE,
    }


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _file_descriptor():
    """The FileDescriptorProto of every message and enum in the tables."""
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    scalars = _scalar_types()
    fdp = descriptor_pb2.FileDescriptorProto(name=_FILE_NAME, package=_PACKAGE, syntax="proto3")
    containers: dict[str, object] = {}  # dotted name -> DescriptorProto

    def container(dotted: str):
        """The DescriptorProto of message ``dotted`` (made, nested in its parent, on demand)."""
        if dotted in containers:
            return containers[dotted]
        outer, _, inner = dotted.rpartition(".")
        msg = (container(outer).nested_type if outer else fdp.message_type).add(name=inner)
        containers[dotted] = msg
        return msg

    for dotted in _MESSAGES:  # parents first, so nested order follows the table
        container(dotted)
    for dotted, body in _ENUMS.items():
        outer, _, inner = dotted.rpartition(".")
        enum = (container(outer).enum_type if outer else fdp.enum_type).add(name=inner)
        words = body.split()
        for value_name, number in zip(words[::2], words[1::2]):
            enum.value.add(name=value_name, number=int(number))

    def type_of(dotted_type: str, field):
        if dotted_type in scalars:
            field.type = scalars[dotted_type]
        elif dotted_type in _ENUMS:
            field.type = F.TYPE_ENUM
            field.type_name = f".{_PACKAGE}.{dotted_type}"
        elif dotted_type in _MESSAGES:
            field.type = F.TYPE_MESSAGE
            field.type_name = f".{_PACKAGE}.{dotted_type}"
        else:
            raise ValueError(f"schema: unknown type {dotted_type!r}")

    for dotted, body in _MESSAGES.items():
        msg = container(dotted)
        oneofs: dict[str, int] = {}
        for line in body.strip().splitlines():
            words = line.split()
            number, name, rest = int(words[0]), words[1], words[2:]
            field = msg.field.add(name=name, number=number, json_name=_camel(name)[:1].lower()
                                  + _camel(name)[1:])
            field.label = F.LABEL_OPTIONAL
            if rest and rest[0] == "repeated":
                field.label = F.LABEL_REPEATED
                rest = rest[1:]
            if rest[-1].startswith("oneof="):
                group = rest.pop()[len("oneof="):]
                if group not in oneofs:
                    oneofs[group] = len(msg.oneof_decl)
                    msg.oneof_decl.add(name=group)
                field.oneof_index = oneofs[group]
            (type_text,) = rest
            if type_text.startswith("map<"):
                key, value = type_text[4:-1].split(",")
                entry = msg.nested_type.add(name=_camel(name) + "Entry")
                entry.options.map_entry = True
                type_of(key, entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL,
                                             json_name="key"))
                type_of(value, entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL,
                                               json_name="value"))
                field.label = F.LABEL_REPEATED
                field.type = F.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{dotted}.{entry.name}"
            else:
                type_of(type_text, field)
    return fdp


@cache
def _pool():
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return pool


@cache
def message_class(name: str):
    """The protobuf message class of ``xla.<name>``: ``message_class("HloModuleProto")()``."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{name}"))


def descriptor_pool():
    """The DescriptorPool holding the messages (for text_format's ``descriptor_pool``)."""
    return _pool()


#: The messages an HLO file may hold, outermost first: how ``xlapy.proto`` tries them.
#: HloProto comes before HloUnoptimizedSnapshot: an HloProto without a buffer assignment is
#: byte for byte an HloUnoptimizedSnapshot without partitions.
TOP_LEVEL_MESSAGES = ("HloSnapshot", "HloProto", "HloUnoptimizedSnapshot",
                      "HloModuleProtoWithConfig", "HloModuleProto")

__all__ = ["TOP_LEVEL_MESSAGES", "descriptor_pool", "message_class"]
