---------------------------------- MODULE MCdeep ----------------------------------
(***************************************************************************************)
(* The deeper CI model: the whole protocol of the core with the split fetch protocol    *)
(* (SendFetch, Fetch, FetchResponse, OffsetsForLeaderEpoch and its response, Tick),     *)
(* loss and reordering of every message, UpdateMetadata, HW checkpoints, ISR shrink,    *)
(* crashes, session expiry and controller failover, default knobs (KIP-320).           *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]

DeepNext ==
    \/ ControllerNext \/ CrashNext \/ ExpiryNext \/ ControllerRequestsNext \/ NetworkNext
    \/ MetadataNext \/ ReplicationNext
=============================================================================
