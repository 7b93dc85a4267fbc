"""Kafka error codes, taken from kafka-python's error classes so there is one table."""
from kafka import errors as _e

NONE = _e.NoError.errno
UNKNOWN_SERVER_ERROR = _e.UnknownError.errno
OFFSET_OUT_OF_RANGE = _e.OffsetOutOfRangeError.errno
CORRUPT_MESSAGE = _e.CorruptRecordError.errno
UNKNOWN_TOPIC_OR_PARTITION = _e.UnknownTopicOrPartitionError.errno
LEADER_NOT_AVAILABLE = _e.LeaderNotAvailableError.errno
NOT_LEADER_OR_FOLLOWER = _e.NotLeaderForPartitionError.errno
REQUEST_TIMED_OUT = _e.RequestTimedOutError.errno
MESSAGE_TOO_LARGE = _e.MessageSizeTooLargeError.errno
INVALID_TOPIC = _e.InvalidTopicError.errno
NOT_ENOUGH_REPLICAS = _e.NotEnoughReplicasError.errno
NOT_ENOUGH_REPLICAS_AFTER_APPEND = _e.NotEnoughReplicasAfterAppendError.errno
INVALID_REQUIRED_ACKS = _e.InvalidRequiredAcksError.errno
UNSUPPORTED_VERSION = _e.UnsupportedVersionError.errno
TOPIC_ALREADY_EXISTS = _e.TopicAlreadyExistsError.errno
INVALID_PARTITIONS = _e.InvalidPartitionsError.errno
INVALID_REPLICATION_FACTOR = _e.InvalidReplicationFactorError.errno
INVALID_REPLICA_ASSIGNMENT = _e.InvalidReplicationAssignmentError.errno
INVALID_CONFIG = _e.InvalidConfigurationError.errno
NOT_CONTROLLER = _e.NotControllerError.errno
INVALID_REQUEST = _e.InvalidRequestError.errno
UNSUPPORTED_FOR_MESSAGE_FORMAT = _e.UnsupportedForMessageFormatError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER = _e.OutOfOrderSequenceNumberError.errno
DUPLICATE_SEQUENCE_NUMBER = _e.DuplicateSequenceNumberError.errno
INVALID_PRODUCER_EPOCH = _e.InvalidProducerEpochError.errno
KAFKA_STORAGE_ERROR = _e.KafkaStorageError.errno
UNKNOWN_PRODUCER_ID = _e.UnknownProducerIdError.errno
REASSIGNMENT_IN_PROGRESS = _e.ReassignmentInProgressError.errno
FENCED_LEADER_EPOCH = _e.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = _e.UnknownLeaderEpochError.errno
NO_REASSIGNMENT_IN_PROGRESS = _e.NoReassignmentInProgressError.errno
INVALID_RECORD = _e.InvalidRecordError.errno
UNKNOWN_TOPIC_ID = _e.UnknownTopicIdError.errno
STALE_BROKER_EPOCH = _e.StaleBrokerEpochError.errno
BROKER_NOT_AVAILABLE = _e.BrokerNotAvailableError.errno
ELECTION_NOT_NEEDED = _e.ElectionNotNeededError.errno
ELIGIBLE_LEADERS_NOT_AVAILABLE = _e.EligibleLeadersNotAvailableError.errno
PREFERRED_LEADER_NOT_AVAILABLE = _e.PreferredLeaderNotAvailableError.errno
INVALID_TXN_STATE = _e.InvalidTxnStateError.errno
OFFSET_NOT_AVAILABLE = _e.OffsetNotAvailableError.errno
OFFSET_MOVED_TO_TIERED_STORAGE = _e.OffsetMovedToTieredStorageError.errno


class KafkaError(Exception):
    """An error that maps to a Kafka error code (raised inside handlers)."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message or str(code))
        self.code = code
        self.message = message


def name(code: int) -> str:
    for cls in _e.__dict__.values():
        if isinstance(cls, type) and getattr(cls, "errno", None) == code and cls.__name__ != "CorruptRecordException":
            return cls.__name__
    return f"error {code}"


def name_of(code: int) -> str:
    """Kafka's name of an error code (NOT_LEADER_OR_FOLLOWER, ...)."""
    return "NOT_LEADER_OR_FOLLOWER" if code == NOT_LEADER_OR_FOLLOWER else _e.for_code(code).message
