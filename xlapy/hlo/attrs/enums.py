"""Enumerated attribute values with XLA's text spellings: comparison direction and type,
FFT type, RNG algorithm and distribution, triangular-solve transpose, operand precision,
fusion kind, custom-call schedule and API version, collective op group mode. Each enum's ``text`` is XLA's word."""

from __future__ import annotations

import enum

from xlapy.hlo.attrs import EnumKind


class _Texted(enum.Enum):
    @property
    def text(self) -> str:
        return self.value

    def __str__(self) -> str:
        return self.value


class ComparisonDirection(_Texted):
    EQ = "EQ"
    NE = "NE"
    GE = "GE"
    GT = "GT"
    LE = "LE"
    LT = "LT"


class ComparisonType(_Texted):
    FLOAT = "FLOAT"
    TOTALORDER = "TOTALORDER"
    SIGNED = "SIGNED"
    UNSIGNED = "UNSIGNED"


class FftType(_Texted):
    FFT = "FFT"
    IFFT = "IFFT"
    RFFT = "RFFT"
    IRFFT = "IRFFT"


class RandomAlgorithm(_Texted):
    RNG_DEFAULT = "rng_default"
    RNG_THREE_FRY = "rng_three_fry"
    RNG_PHILOX = "rng_philox"


class RandomDistribution(_Texted):
    RNG_UNIFORM = "rng_uniform"
    RNG_NORMAL = "rng_normal"


class Transpose(_Texted):
    """TriangularSolveOptions.transpose_a."""

    NO_TRANSPOSE = "NO_TRANSPOSE"
    TRANSPOSE = "TRANSPOSE"
    ADJOINT = "ADJOINT"


class Precision(_Texted):
    """PrecisionConfig.Precision, printed lower-case in ``operand_precision={...}``."""

    DEFAULT = "default"
    HIGH = "high"
    HIGHEST = "highest"
    PACKED_NIBBLE = "packed_nibble"


class FusionKind(_Texted):
    LOOP = "kLoop"
    INPUT = "kInput"
    OUTPUT = "kOutput"
    CUSTOM = "kCustom"


class CustomCallSchedule(_Texted):
    SCHEDULE_NONE = "SCHEDULE_NONE"
    SCHEDULE_LATEST = "SCHEDULE_LATEST"
    SCHEDULE_EARLIEST = "SCHEDULE_EARLIEST"


class CustomCallApiVersion(_Texted):
    API_VERSION_UNSPECIFIED = "API_VERSION_UNSPECIFIED"
    API_VERSION_ORIGINAL = "API_VERSION_ORIGINAL"
    API_VERSION_STATUS_RETURNING = "API_VERSION_STATUS_RETURNING"
    API_VERSION_STATUS_RETURNING_UNIFIED = "API_VERSION_STATUS_RETURNING_UNIFIED"
    API_VERSION_TYPED_FFI = "API_VERSION_TYPED_FFI"


class CollectiveOpGroupMode(_Texted):
    """all-reduce/reduce-scatter ``mode=``: parsed and ignored by XLA (never printed)."""

    CROSS_REPLICA = "cross_replica"
    CROSS_PARTITION = "cross_partition"
    CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
    FLATTENED_ID = "flattened_id"


COMPARISON_DIRECTION = EnumKind(ComparisonDirection, "comparison direction")
COMPARISON_TYPE = EnumKind(ComparisonType, "comparison type")
FFT_TYPE = EnumKind(FftType, "fft type")
RANDOM_ALGORITHM = EnumKind(RandomAlgorithm, "rng algorithm")
RANDOM_DISTRIBUTION = EnumKind(RandomDistribution, "rng distribution")
TRANSPOSE = EnumKind(Transpose, "transpose")
FUSION_KIND = EnumKind(FusionKind, "fusion kind")
CUSTOM_CALL_SCHEDULE = EnumKind(CustomCallSchedule, "custom call schedule")
CUSTOM_CALL_API_VERSION = EnumKind(CustomCallApiVersion, "custom-call API version",
                                   unknown="Unknown API version")
PRECISION = EnumKind(Precision, "precision")
COLLECTIVE_OP_GROUP_MODE = EnumKind(CollectiveOpGroupMode, "collective op group mode")
