"""Kafka's error table (``org.apache.kafka.common.protocol.Errors``), the one kconform has.

Every error name in kconform comes from here: the broker answers with these codes, the proxy
synthesizes them, drivers normalise client errors to these names, reports print them. Names and
numbers are Kafka's, so that outcomes read exactly like Kafka's own logs.

The rows were read from kafka-clients 4.4.0 (the Java driver's version) with ``Errors.values()``:
code, enum name, the ``ApiException`` class ``Errors.exception()`` builds, and whether that class
extends ``RetriableException``. Regenerate them when a newer kafka-clients adds codes;
tests/unit/protocol/test_errors.py holds them against kafka-python's table.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class ErrorSpec(NamedTuple):
    code: int
    name: str                 # Kafka's enum name: NOT_COORDINATOR
    exception: str | None     # the Java exception class: NotCoordinatorException (None for NONE)
    retriable: bool           # that class extends RetriableException


ERROR_TABLE: tuple[ErrorSpec, ...] = tuple(ErrorSpec(*row) for row in (
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerException", False),
    (0, "NONE", None, False),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeException", False),
    (2, "CORRUPT_MESSAGE", "CorruptRecordException", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionException", True),
    (4, "INVALID_FETCH_SIZE", "InvalidFetchSizeException", False),
    (5, "LEADER_NOT_AVAILABLE", "LeaderNotAvailableException", True),
    (6, "NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerException", True),
    (7, "REQUEST_TIMED_OUT", "TimeoutException", True),
    (8, "BROKER_NOT_AVAILABLE", "BrokerNotAvailableException", False),
    (9, "REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableException", True),
    (10, "MESSAGE_TOO_LARGE", "RecordTooLargeException", False),
    (11, "STALE_CONTROLLER_EPOCH", "ControllerMovedException", False),
    (12, "OFFSET_METADATA_TOO_LARGE", "OffsetMetadataTooLarge", False),
    (13, "NETWORK_EXCEPTION", "NetworkException", True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "CoordinatorLoadInProgressException", True),
    (15, "COORDINATOR_NOT_AVAILABLE", "CoordinatorNotAvailableException", True),
    (16, "NOT_COORDINATOR", "NotCoordinatorException", True),
    (17, "INVALID_TOPIC_EXCEPTION", "InvalidTopicException", False),
    (18, "RECORD_LIST_TOO_LARGE", "RecordBatchTooLargeException", False),
    (19, "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasException", True),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendException", True),
    (21, "INVALID_REQUIRED_ACKS", "InvalidRequiredAcksException", False),
    (22, "ILLEGAL_GENERATION", "IllegalGenerationException", False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", "InconsistentGroupProtocolException", False),
    (24, "INVALID_GROUP_ID", "InvalidGroupIdException", False),
    (25, "UNKNOWN_MEMBER_ID", "UnknownMemberIdException", False),
    (26, "INVALID_SESSION_TIMEOUT", "InvalidSessionTimeoutException", False),
    (27, "REBALANCE_IN_PROGRESS", "RebalanceInProgressException", False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", "InvalidCommitOffsetSizeException", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationException", False),
    (30, "GROUP_AUTHORIZATION_FAILED", "GroupAuthorizationException", False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", "ClusterAuthorizationException", False),
    (32, "INVALID_TIMESTAMP", "InvalidTimestampException", False),
    (33, "UNSUPPORTED_SASL_MECHANISM", "UnsupportedSaslMechanismException", False),
    (34, "ILLEGAL_SASL_STATE", "IllegalSaslStateException", False),
    (35, "UNSUPPORTED_VERSION", "UnsupportedVersionException", False),
    (36, "TOPIC_ALREADY_EXISTS", "TopicExistsException", False),
    (37, "INVALID_PARTITIONS", "InvalidPartitionsException", False),
    (38, "INVALID_REPLICATION_FACTOR", "InvalidReplicationFactorException", False),
    (39, "INVALID_REPLICA_ASSIGNMENT", "InvalidReplicaAssignmentException", False),
    (40, "INVALID_CONFIG", "InvalidConfigurationException", False),
    (41, "NOT_CONTROLLER", "NotControllerException", True),
    (42, "INVALID_REQUEST", "InvalidRequestException", False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "UnsupportedForMessageFormatException", False),
    (44, "POLICY_VIOLATION", "PolicyViolationException", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceException", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceException", False),
    (47, "INVALID_PRODUCER_EPOCH", "InvalidProducerEpochException", False),
    (48, "INVALID_TXN_STATE", "InvalidTxnStateException", False),
    (49, "INVALID_PRODUCER_ID_MAPPING", "InvalidPidMappingException", False),
    (50, "INVALID_TRANSACTION_TIMEOUT", "InvalidTxnTimeoutException", False),
    (51, "CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsException", True),
    (52, "TRANSACTION_COORDINATOR_FENCED", "TransactionCoordinatorFencedException", False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "TransactionalIdAuthorizationException", False),
    (54, "SECURITY_DISABLED", "SecurityDisabledException", False),
    (55, "OPERATION_NOT_ATTEMPTED", "OperationNotAttemptedException", False),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageException", True),
    (57, "LOG_DIR_NOT_FOUND", "LogDirNotFoundException", False),
    (58, "SASL_AUTHENTICATION_FAILED", "SaslAuthenticationException", False),
    (59, "UNKNOWN_PRODUCER_ID", "UnknownProducerIdException", False),
    (60, "REASSIGNMENT_IN_PROGRESS", "ReassignmentInProgressException", False),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", "DelegationTokenDisabledException", False),
    (62, "DELEGATION_TOKEN_NOT_FOUND", "DelegationTokenNotFoundException", False),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", "DelegationTokenOwnerMismatchException", False),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "UnsupportedByAuthenticationException", False),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "DelegationTokenAuthorizationException", False),
    (66, "DELEGATION_TOKEN_EXPIRED", "DelegationTokenExpiredException", False),
    (67, "INVALID_PRINCIPAL_TYPE", "InvalidPrincipalTypeException", False),
    (68, "NON_EMPTY_GROUP", "GroupNotEmptyException", False),
    (69, "GROUP_ID_NOT_FOUND", "GroupIdNotFoundException", False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", "FetchSessionIdNotFoundException", True),
    (71, "INVALID_FETCH_SESSION_EPOCH", "InvalidFetchSessionEpochException", True),
    (72, "LISTENER_NOT_FOUND", "ListenerNotFoundException", True),
    (73, "TOPIC_DELETION_DISABLED", "TopicDeletionDisabledException", False),
    (74, "FENCED_LEADER_EPOCH", "FencedLeaderEpochException", True),
    (75, "UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochException", True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeException", False),
    (77, "STALE_BROKER_EPOCH", "StaleBrokerEpochException", False),
    (78, "OFFSET_NOT_AVAILABLE", "OffsetNotAvailableException", True),
    (79, "MEMBER_ID_REQUIRED", "MemberIdRequiredException", False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableException", True),
    (81, "GROUP_MAX_SIZE_REACHED", "GroupMaxSizeReachedException", False),
    (82, "FENCED_INSTANCE_ID", "FencedInstanceIdException", False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableException", True),
    (84, "ELECTION_NOT_NEEDED", "ElectionNotNeededException", True),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", "NoReassignmentInProgressException", False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", "GroupSubscribedToTopicException", False),
    (87, "INVALID_RECORD", "InvalidRecordException", False),
    (88, "UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitException", True),
    (89, "THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededException", True),
    (90, "PRODUCER_FENCED", "ProducerFencedException", False),
    (91, "RESOURCE_NOT_FOUND", "ResourceNotFoundException", False),
    (92, "DUPLICATE_RESOURCE", "DuplicateResourceException", False),
    (93, "UNACCEPTABLE_CREDENTIAL", "UnacceptableCredentialException", False),
    (94, "INCONSISTENT_VOTER_SET", "InconsistentVoterSetException", False),
    (95, "INVALID_UPDATE_VERSION", "InvalidUpdateVersionException", False),
    (96, "FEATURE_UPDATE_FAILED", "FeatureUpdateFailedException", False),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", "PrincipalDeserializationException", False),
    (98, "SNAPSHOT_NOT_FOUND", "SnapshotNotFoundException", False),
    (99, "POSITION_OUT_OF_RANGE", "PositionOutOfRangeException", False),
    (100, "UNKNOWN_TOPIC_ID", "UnknownTopicIdException", True),
    (101, "DUPLICATE_BROKER_REGISTRATION", "DuplicateBrokerRegistrationException", False),
    (102, "BROKER_ID_NOT_REGISTERED", "BrokerIdNotRegisteredException", False),
    (103, "INCONSISTENT_TOPIC_ID", "InconsistentTopicIdException", True),
    (104, "INCONSISTENT_CLUSTER_ID", "InconsistentClusterIdException", False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", "TransactionalIdNotFoundException", False),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdException", True),
    (107, "INELIGIBLE_REPLICA", "IneligibleReplicaException", False),
    (108, "NEW_LEADER_ELECTED", "NewLeaderElectedException", False),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", "OffsetMovedToTieredStorageException", False),
    (110, "FENCED_MEMBER_EPOCH", "FencedMemberEpochException", False),
    (111, "UNRELEASED_INSTANCE_ID", "UnreleasedInstanceIdException", False),
    (112, "UNSUPPORTED_ASSIGNOR", "UnsupportedAssignorException", False),
    (113, "STALE_MEMBER_EPOCH", "StaleMemberEpochException", False),
    (114, "MISMATCHED_ENDPOINT_TYPE", "MismatchedEndpointTypeException", False),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", "UnsupportedEndpointTypeException", False),
    (116, "UNKNOWN_CONTROLLER_ID", "UnknownControllerIdException", False),
    (117, "UNKNOWN_SUBSCRIPTION_ID", "UnknownSubscriptionIdException", False),
    (118, "TELEMETRY_TOO_LARGE", "TelemetryTooLargeException", False),
    (119, "INVALID_REGISTRATION", "InvalidRegistrationException", False),
    (120, "TRANSACTION_ABORTABLE", "TransactionAbortableException", False),
    (121, "INVALID_RECORD_STATE", "InvalidRecordStateException", False),
    (122, "SHARE_SESSION_NOT_FOUND", "ShareSessionNotFoundException", True),
    (123, "INVALID_SHARE_SESSION_EPOCH", "InvalidShareSessionEpochException", True),
    (124, "FENCED_STATE_EPOCH", "FencedStateEpochException", False),
    (125, "INVALID_VOTER_KEY", "InvalidVoterKeyException", False),
    (126, "DUPLICATE_VOTER", "DuplicateVoterException", False),
    (127, "VOTER_NOT_FOUND", "VoterNotFoundException", False),
    (128, "INVALID_REGULAR_EXPRESSION", "InvalidRegularExpression", False),
    (129, "REBOOTSTRAP_REQUIRED", "RebootstrapRequiredException", False),
    (130, "STREAMS_INVALID_TOPOLOGY", "StreamsInvalidTopologyException", False),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", "StreamsInvalidTopologyEpochException", False),
    (132, "STREAMS_TOPOLOGY_FENCED", "StreamsTopologyFencedException", False),
    (133, "SHARE_SESSION_LIMIT_REACHED", "ShareSessionLimitReachedException", True),
    (134, "GROUP_DELETION_FAILED", "GroupDeletionFailedException", False),
    (135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", "StreamsTopologyDescriptionUpdateFailedException", False),
    (136, "CONTROLLER_ID_NOT_REGISTERED", "ControllerIdNotRegisteredException", False),
))

ERRORS_BY_CODE: dict[int, ErrorSpec] = {e.code: e for e in ERROR_TABLE}
ERRORS_BY_NAME: dict[str, ErrorSpec] = {e.name: e for e in ERROR_TABLE}

#: The table as an enum, for the broker's code: ``Errors.NOT_COORDINATOR`` is the int 16.
Errors = enum.IntEnum("Errors", [(e.name, e.code) for e in ERROR_TABLE], module=__name__, qualname="Errors")

RETRIABLE: frozenset[Errors] = frozenset(Errors(e.code) for e in ERROR_TABLE if e.retriable)


def error_name(code: int) -> str:
    """Kafka's name for a wire error code; ``ERROR_<code>`` for a code Kafka does not have."""
    spec = ERRORS_BY_CODE.get(code)
    return spec.name if spec is not None else f"ERROR_{code}"


def error_code(name: str) -> int | None:
    """The wire code of Kafka's error ``name``; None for a name that is not Kafka's."""
    spec = ERRORS_BY_NAME.get(name)
    return spec.code if spec is not None else None


class KafkaError(Exception):
    """The broker's one error root: a refusal answered with Kafka's error code ``error``.

    Raised where the refusal is decided -- the log (``log.errors``: a subclass per Kafka
    exception, its code a class attribute), a partition, a coordinator's cache or state machine --
    and turned into a response field where the request is answered; appends are answered in one
    place, ``server/replica_manager``. ``message`` is what the response's error message says
    where the API has one (None: nothing beyond the code)."""

    error: Errors = Errors.UNKNOWN_SERVER_ERROR

    def __init__(self, error: Errors | None = None, message: str | None = None):
        if error is not None:
            self.error = Errors(error)
        self.message = message
        super().__init__(message or self.error.name)
