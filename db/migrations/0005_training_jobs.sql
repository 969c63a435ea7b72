CREATE TYPE "public"."training_job_state" AS ENUM('queued', 'running', 'preempted', 'succeeded', 'failed', 'cancelled');--> statement-breakpoint
CREATE TABLE "training_job_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" uuid NOT NULL,
	"type" text NOT NULL,
	"from_state" "training_job_state",
	"to_state" "training_job_state" NOT NULL,
	"run_generation" integer NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "training_jobs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"fleet_id" uuid NOT NULL,
	"template" text NOT NULL,
	"base_model" text NOT NULL,
	"adapter_name" text NOT NULL,
	"dataset" text NOT NULL,
	"steps" integer NOT NULL,
	"params" jsonb NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"publish_on_success" boolean DEFAULT false NOT NULL,
	"state" "training_job_state" DEFAULT 'queued' NOT NULL,
	"run_generation" integer DEFAULT 0 NOT NULL,
	"domain_id" uuid,
	"gpu_index" integer,
	"preempted_at_step" integer,
	"checkpoint_step" integer,
	"checkpoint_path" text,
	"checkpoint_generation" integer,
	"reason" text,
	"requested_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	CONSTRAINT "training_jobs_running_has_slot" CHECK ("training_jobs"."state" <> 'running' or ("training_jobs"."domain_id" is not null and "training_jobs"."gpu_index" is not null)),
	CONSTRAINT "training_jobs_preempted_has_step" CHECK (("training_jobs"."state" = 'preempted') = ("training_jobs"."preempted_at_step" is not null)),
	CONSTRAINT "training_jobs_checkpoint_whole" CHECK (("training_jobs"."checkpoint_step" is null) = ("training_jobs"."checkpoint_path" is null) and ("training_jobs"."checkpoint_step" is null) = ("training_jobs"."checkpoint_generation" is null)),
	CONSTRAINT "training_jobs_generation_fenced" CHECK ("training_jobs"."checkpoint_generation" is null or "training_jobs"."checkpoint_generation" <= "training_jobs"."run_generation")
);
--> statement-breakpoint
ALTER TABLE "training_job_events" ADD CONSTRAINT "training_job_events_job_id_training_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."training_jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "training_jobs" ADD CONSTRAINT "training_jobs_fleet_id_fleets_id_fk" FOREIGN KEY ("fleet_id") REFERENCES "public"."fleets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "training_job_events_job_id_idx" ON "training_job_events" USING btree ("job_id","id");--> statement-breakpoint
CREATE INDEX "training_jobs_fleet_queue_idx" ON "training_jobs" USING btree ("fleet_id","state","priority" DESC NULLS LAST,"created_at");--> statement-breakpoint
CREATE INDEX "training_jobs_fleet_created_idx" ON "training_jobs" USING btree ("fleet_id","created_at");