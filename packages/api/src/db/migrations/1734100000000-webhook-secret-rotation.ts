import { TableColumn, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Signing-secret rotation: the secret a rotation replaced, and until when deliveries are signed
 * with it too (both null when no rotation is in its overlap).
 */
export class WebhookSecretRotation1734100000000 implements MigrationInterface {
  name = "WebhookSecretRotation1734100000000";

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn("webhook_endpoints", new TableColumn({ name: "previous_secret", type: "varchar", length: "100", isNullable: true }));
    await q.addColumn("webhook_endpoints", new TableColumn({ name: "previous_secret_expires_at", type: "bigint", isNullable: true }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropColumn("webhook_endpoints", "previous_secret_expires_at");
    await q.dropColumn("webhook_endpoints", "previous_secret");
  }
}
