CREATE TYPE "public"."domain_state" AS ENUM('provisioning', 'ready', 'degraded', 'failed', 'stopping', 'stopped');--> statement-breakpoint
CREATE TYPE "public"."operation_kind" AS ENUM('promote', 'demote');--> statement-breakpoint
CREATE TYPE "public"."operation_state" AS ENUM('pending', 'running', 'succeeded', 'failed', 'cancelled');--> statement-breakpoint
CREATE TYPE "public"."provider" AS ENUM('static', 'skypilot', 'skyserve');--> statement-breakpoint
CREATE TYPE "public"."slot_kind" AS ENUM('inference', 'training');--> statement-breakpoint
CREATE TYPE "public"."slot_state" AS ENUM('starting', 'serving', 'sleeping', 'waking', 'probing', 'failed', 'stopped', 'idle', 'training', 'stopping');--> statement-breakpoint
CREATE TABLE "fleets" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"slug" text NOT NULL,
	"display_name" text NOT NULL,
	"active_domain_id" uuid,
	"route_revision" bigint DEFAULT 0 NOT NULL,
	"policy" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "fleets_slug_unique" UNIQUE("slug")
);
--> statement-breakpoint
CREATE TABLE "domains" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"fleet_id" uuid NOT NULL,
	"slug" text NOT NULL,
	"display_name" text NOT NULL,
	"provider" "provider" NOT NULL,
	"placement" jsonb NOT NULL,
	"supervisor_url" text NOT NULL,
	"serving_base_url" text,
	"launch" jsonb,
	"state" "domain_state" DEFAULT 'provisioning' NOT NULL,
	"state_changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "domains_fleet_slug_unique" UNIQUE("fleet_id","slug"),
	CONSTRAINT "domains_fleet_id_id_unique" UNIQUE("fleet_id","id")
);
--> statement-breakpoint
CREATE TABLE "slots" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"domain_id" uuid NOT NULL,
	"kind" "slot_kind" NOT NULL,
	"gpu_index" integer NOT NULL,
	"state" "slot_state" NOT NULL,
	"state_changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sleep_level" integer,
	"models" jsonb,
	"command" jsonb,
	"checkpoint_dir" text,
	"env" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "slots_domain_gpu_kind_unique" UNIQUE("domain_id","gpu_index","kind"),
	CONSTRAINT "slots_state_matches_kind" CHECK (("slots"."kind" = 'inference' and "slots"."state" in ('starting', 'serving', 'sleeping', 'waking', 'probing', 'failed', 'stopped') and "slots"."sleep_level" is not null and "slots"."models" is not null)
        or ("slots"."kind" = 'training' and "slots"."state" in ('idle', 'training', 'stopping', 'failed', 'stopped') and "slots"."command" is not null and "slots"."checkpoint_dir" is not null))
);
--> statement-breakpoint
CREATE TABLE "operations" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"fleet_id" uuid NOT NULL,
	"kind" "operation_kind" NOT NULL,
	"target_domain_id" uuid NOT NULL,
	"from_domain_id" uuid,
	"state" "operation_state" DEFAULT 'pending' NOT NULL,
	"step" text,
	"reason" text NOT NULL,
	"requested_by" text NOT NULL,
	"workflow_id" text NOT NULL,
	"routing_committed" boolean DEFAULT false NOT NULL,
	"route_revision" bigint,
	"error" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operations_workflow_id_unique" UNIQUE("workflow_id")
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"fleet_id" uuid NOT NULL,
	"operation_id" uuid,
	"domain_id" uuid,
	"type" text NOT NULL,
	"message" text NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "fleets" ADD CONSTRAINT "fleets_active_domain_fk" FOREIGN KEY ("id","active_domain_id") REFERENCES "public"."domains"("fleet_id","id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "domains" ADD CONSTRAINT "domains_fleet_id_fleets_id_fk" FOREIGN KEY ("fleet_id") REFERENCES "public"."fleets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "slots" ADD CONSTRAINT "slots_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operations" ADD CONSTRAINT "operations_fleet_id_fleets_id_fk" FOREIGN KEY ("fleet_id") REFERENCES "public"."fleets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_fleet_id_fleets_id_fk" FOREIGN KEY ("fleet_id") REFERENCES "public"."fleets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_operation_id_operations_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."operations"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "operations_one_in_flight_per_fleet" ON "operations" USING btree ("fleet_id") WHERE state in ('pending', 'running');--> statement-breakpoint
CREATE INDEX "operations_fleet_created_idx" ON "operations" USING btree ("fleet_id","created_at");--> statement-breakpoint
CREATE INDEX "events_fleet_id_idx" ON "events" USING btree ("fleet_id","id");