-------------------------------- MODULE MCliveness --------------------------------
(***************************************************************************************)
(* Liveness model of the core (KafkaProperties): two brokers from a settled cluster      *)
(* (controller 1, leader 2, both in the ISR), one record, one broker crash (and         *)
(* restart), controller failover, ISR expiration of a follower that is behind, fused    *)
(* fetch rounds, default knobs (KIP-320).  Faults are bounded, with no message loss and *)
(* no ISR shrink of a follower that has caught up (both unbounded in the safety models):*)
(* every behaviour's faults stop, which is what the properties' "once the faults stop"  *)
(* needs (KafkaProperties' header).  MClivenessExpiry.cfg adds a session expiry.  No    *)
(* constraint either: a constraint cuts behaviours short, and a behaviour cut short      *)
(* would stutter where the system would not; MaxControllerEpoch leaves room for one      *)
(* election per fault, and the leader epochs are bounded by the faults.                 *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants, KafkaProperties

MC_Assignment == [p \in Partitions |-> <<2, 1>>]
\* MClivenessExpiry.cfg: broker 1 leads and is the controller, so that a leader's crash is also a
\* controller failover (which reads the store afresh: no stale cache, unlike MCliveness's counterexample).
MC_ControllerLeads == [p \in Partitions |-> <<1, 2>>]

LiveNext ==
    \/ ControllerNext \/ CrashNext \/ ExpiryNext \/ ControllerRequestsNext \/ ProduceNext \/ FusedFetchNext
    \/ IsrExpireNext

\* The safe design, with the fairness of every process.
LiveSpec == InitStable /\ [][LiveNext]_vars /\ Fairness

\* Broken variants, one per property (MCliveness*.cfg), to show that TLC finds each violation.
\* No re-election on broker failure: the controller never handles BrokerChange (LeaderElected).
NoFailoverNext ==
    \/ \E b \in Brokers : ControllerElect(b) \/ ControllerResign(b) \/ TopicChange(b) \/ IsrChangeNotification(b)
    \/ CrashNext \/ ExpiryNext \/ ControllerRequestsNext \/ ProduceNext \/ FusedFetchNext \/ IsrExpireNext
\* Its controller fairness without BrokerChange: a guard must imply that the spec can take the step.
NoFailoverStep(b) ==
    ControllerElect(b) \/ ControllerResign(b) \/ TopicChange(b) \/ IsrChangeNotification(b) \/ BrokerReregister(b)
NoFailoverPending(b) ==
    \/ alive[b] /\ controller = NoLeader /\ controller_epoch < MaxControllerEpoch
    \/ alive[b] /\ acting_controller_epoch[b] # 0 /\ controller # b /\ controller # NoLeader
    \/ \E kind \in EventKinds \ {"BrokerChange"} : CanHandle(b, kind)
    \/ alive[b] /\ reregister[b]
NoFailoverSpec ==
    /\ InitStable /\ [][NoFailoverNext]_vars /\ RequestFairness /\ FetchFairness /\ IsrFairness
    /\ <>[](\E b \in Brokers : NoFailoverPending(b)) => []<><<\E b \in Brokers : NoFailoverStep(b)>>_vars

\* The followers' fetchers not fair, and no ISR expiration: a follower may stop fetching and stay in
\* the ISR (HighWatermarkCatchesUp).  Either fairness alone suffices: a follower that stops fetching is
\* expired from the ISR, and the HW then advances without it.
UnfairFetchSpec == InitStable /\ [][LiveNext]_vars /\ ControllerFairness /\ RequestFairness

\* The controller election not fair: /controller may stay empty (ControllerElected).  Every other
\* controller event keeps its fairness.
OtherControllerStep(b) ==
    ControllerResign(b) \/ BrokerChange(b) \/ TopicChange(b) \/ IsrChangeNotification(b) \/ BrokerReregister(b)
OtherControllerPending(b) ==
    \/ alive[b] /\ acting_controller_epoch[b] # 0 /\ controller # b /\ controller # NoLeader
    \/ \E kind \in EventKinds : CanHandle(b, kind)
    \/ alive[b] /\ reregister[b]
UnfairElectionSpec ==
    /\ InitStable /\ [][LiveNext]_vars /\ RequestFairness /\ FetchFairness /\ IsrFairness
    /\ <>[](\E b \in Brokers : OtherControllerPending(b)) => []<><<\E b \in Brokers : OtherControllerStep(b)>>_vars
=============================================================================
