---------------------------------- MODULE MCci ----------------------------------
(***************************************************************************************)
(* CI model: the default knobs (KIP-320 era, clean elections, controller-epoch fencing, *)
(* leader-epoch check, min ISR 1).  Two brokers from a settled cluster (controller 1,    *)
(* leader 1, both replicas in the ISR), one record, one broker crash (and restart), one  *)
(* session expiry (a zombie controller), lossy reordering controller requests,          *)
(* controller failover, ISR shrink and expansion, HW checkpoints.  Fetches are fused     *)
(* rounds here; MCdeep checks the split request/response protocol.                      *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]
\* MCci3: the same faults on three brokers, every partition replicated on all three (broker 1 leads).
MC_Assignment3 == [p \in Partitions |-> <<1, 2, 3>>]

CINext ==
    \/ ControllerNext \/ CrashNext \/ ExpiryNext \/ ControllerRequestsNext \/ ControllerDropNext
    \/ ProduceNext \/ FusedFetchNext \/ ShrinkNext
=============================================================================
