------------------------------- MODULE MCkafka1211 -------------------------------
(***************************************************************************************)
(* KAFKA-1211 (the motivation of KIP-101): with the original design a replica that      *)
(* becomes a follower truncates its log to its own high watermark, which may lag the    *)
(* leader's.  Three replicas: the leader commits a record once both followers have it,  *)
(* but one follower has not yet learnt the new HW; another replica dies, the controller *)
(* shrinks the ISR with a new leader epoch, and the lagging follower -- still in the    *)
(* ISR -- truncates the committed record away.  Violates NoCommittedDataLoss.           *)
(* Fetches are fused rounds (SendFetch; Fetch; FetchResponse with nothing in between).  *)
(***************************************************************************************)
EXTENDS TruncationHW, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2, 3>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ CrashNext \/ ControllerNext \/ ControllerRequestsNext
=============================================================================
